// GPU utilization, memory and power during a job, from NVML: the evidence
// behind "the GPU was busy 97% of the time" or "it sat at 40% waiting on the
// tokenizer". A background thread asks NVML every period and keeps running
// sums; with a trace it also records counters for the timeline.
//
// NVML is opened with dlopen at run time (DESIGN "Libraries": no header and
// no link dependency on these machines), so this builds and runs without CUDA.
// No library, no GPU, a missing symbol or a failing call: the sampler is off,
// reason() says why, and nothing is thrown or printed.
//
// "Utilization" is NVML's: the share of the last sample period (1/6 s to 1 s,
// by product) during which at least one kernel ran, not how full the SMs were.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/trace.h"

namespace stoke {

struct GpuSamplerSummary {
  std::string name;                     // "NVIDIA H200"; empty when NVML does not say
  uint64_t samples = 0;                 // periods whose utilization was read
  double utilization_mean = 0;          // % of time a kernel ran
  double utilization_max = 0;
  double memory_utilization_mean = 0;   // % of time device memory was read or written
  uint64_t memory_samples = 0;          // 0: the memory fields below are unknown
  uint64_t memory_used_max_bytes = 0;
  uint64_t memory_total_bytes = 0;
  uint64_t power_samples = 0;           // 0: the board does not report power
  double power_mean_w = 0;
  double power_max_w = 0;
};

class GpuSampler {
 public:
  // Opens NVML (env STOKE_NVML_LIBRARY, else libnvidia-ml.so.1) and, when the
  // device answers, takes one sample at once, then one every period_seconds on a thread.
  // trace may be nullptr; it must outlive the sampler.
  explicit GpuSampler(int device_index, double period_seconds = 0.1, Trace* trace = nullptr);
  ~GpuSampler();  // stops, shuts NVML down, closes the library
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  bool active() const { return active_; }
  // Why the sampler is off ("" while active): for logs and tests, never shown by default.
  std::string reason() const { return reason_; }
  // Joins the sampling thread; prompt (a condition variable, not a sleep). Idempotent.
  void stop();
  // What was sampled so far; safe to call while sampling.
  GpuSamplerSummary summary() const;

 private:
  struct Nvml;  // the library handle and the functions taken from it
  void run();
  void sample_once();

  Trace* trace_;
  Trace::Clock::duration period_;
  std::unique_ptr<Nvml> nvml_;
  bool active_ = false;
  std::string reason_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
  // Running sums, with mu_ held.
  GpuSamplerSummary sum_;
  double utilization_total_ = 0, memory_utilization_total_ = 0, power_total_w_ = 0;
};

}  // namespace stoke
