#include "jobs/gpu_usage.h"

#include <charconv>
#include <cstdio>

namespace stoke {

std::optional<int> cuda_device_index(const std::string& device_name) {
  constexpr std::string_view prefix = "cuda:";
  if (device_name.rfind(prefix, 0) != 0) return std::nullopt;
  const char* first = device_name.data() + prefix.size();
  const char* last = device_name.data() + device_name.size();
  int index = -1;
  const auto [end, ec] = std::from_chars(first, last, index);
  if (ec != std::errc() || end != last || first == last || index < 0) return std::nullopt;
  return index;
}

JobGpuUsage::JobGpuUsage(const std::string& device_name, Trace* trace) {
  const std::optional<int> index = cuda_device_index(device_name);
  if (!index) return;
  sampler_ = std::make_unique<GpuSampler>(*index, 0.1, trace);
  // No NVML is not an error (DESIGN "Libraries"): the run just has no GPU line.
  if (!sampler_->active()) sampler_.reset();
}

std::optional<GpuSamplerSummary> JobGpuUsage::finish() {
  if (!sampler_) return std::nullopt;
  sampler_->stop();
  const GpuSamplerSummary s = sampler_->summary();
  if (s.samples == 0 && s.memory_samples == 0 && s.power_samples == 0) return std::nullopt;
  return s;
}

std::string gpu_summary_line(const GpuSamplerSummary& s) {
  constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
  std::string line = "gpu:";
  char buf[128];
  auto add = [&] { line += (line.size() > 4 ? ", " : " ") + std::string(buf); };
  if (s.samples > 0) {
    std::snprintf(buf, sizeof buf, "util %.0f%% mean (max %.0f%%)", s.utilization_mean, s.utilization_max);
    add();
  }
  if (s.memory_samples > 0) {
    std::snprintf(buf, sizeof buf, "memory %.1f / %.1f GiB", static_cast<double>(s.memory_used_max_bytes) / GiB,
                  static_cast<double>(s.memory_total_bytes) / GiB);
    add();
  }
  if (s.power_samples > 0) {
    std::snprintf(buf, sizeof buf, "power %.0f W mean", s.power_mean_w);
    add();
  }
  return line;
}

nlohmann::ordered_json gpu_summary_json(const GpuSamplerSummary& s) {
  using json = nlohmann::ordered_json;
  const bool u = s.samples > 0, m = s.memory_samples > 0, p = s.power_samples > 0;
  return json{{"name", s.name},
              {"samples", s.samples},
              {"utilization_mean", u ? json(s.utilization_mean) : json()},
              {"utilization_max", u ? json(s.utilization_max) : json()},
              {"memory_utilization_mean", u ? json(s.memory_utilization_mean) : json()},
              {"memory_used_max_bytes", m ? json(s.memory_used_max_bytes) : json()},
              {"memory_total_bytes", m ? json(s.memory_total_bytes) : json()},
              {"power_mean_w", p ? json(s.power_mean_w) : json()},
              {"power_max_w", p ? json(s.power_max_w) : json()}};
}

}  // namespace stoke
