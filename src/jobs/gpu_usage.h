// The GPU sampler as embed, classify and train use it: on for a "cuda:N"
// device when NVML answers, silently off otherwise (a CPU run prints and
// writes nothing new); at the end, one line for the run summary and a "gpu"
// object for the run's JSON.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/gpu_sampler.h"
#include "core/trace.h"

namespace stoke {

// N for "cuda:N"; nullopt for "cpu" and anything else.
std::optional<int> cuda_device_index(const std::string& device_name);

class JobGpuUsage {
 public:
  // Starts sampling every 100 ms; trace (may be nullptr) gets the counters.
  JobGpuUsage(const std::string& device_name, Trace* trace);
  // Stops sampling. nullopt when the sampler was off or NVML answered nothing.
  std::optional<GpuSamplerSummary> finish();

 private:
  std::unique_ptr<GpuSampler> sampler_;  // null: not a CUDA device, or no NVML
};

// "gpu: util 97% mean (max 100%), memory 12.3 / 139.8 GiB, power 512 W mean";
// a reading NVML never gave is left out.
std::string gpu_summary_line(const GpuSamplerSummary& s);
// {"name", "samples", "utilization_mean", "utilization_max", "memory_utilization_mean",
//  "memory_used_max_bytes", "memory_total_bytes", "power_mean_w", "power_max_w"};
// a reading NVML never gave is null.
nlohmann::ordered_json gpu_summary_json(const GpuSamplerSummary& s);

}  // namespace stoke
