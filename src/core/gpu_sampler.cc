#include "core/gpu_sampler.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <type_traits>

namespace stoke {

namespace {

// The few NVML declarations used, with nvml.h's names and layouts (there is
// no header on these machines). The _v2 entry points are the ones nvml.h maps
// nvmlInit and nvmlDeviceGetHandleByIndex to; their ABI is stable across drivers.
using nvmlReturn_t = int;  // an enum in nvml.h; NVML_SUCCESS is 0
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlUtilization_t {
  unsigned int gpu;     // % of the last period a kernel ran
  unsigned int memory;  // % of the last period device memory was read or written
};
struct nvmlMemory_t {   // nvmlMemory_t (v1): bytes
  unsigned long long total, free, used;
};
constexpr unsigned kNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

struct GpuSampler::Nvml {
  void* lib = nullptr;
  bool initialised = false;  // nvmlInit_v2 succeeded: nvmlShutdown is owed
  nvmlDevice_t device = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*power_mw)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int) = nullptr;  // optional
  const char* (*error_string)(nvmlReturn_t) = nullptr;                 // optional

  // "" when the device is ready to sample, else why not.
  std::string open(int index) {
    const char* env = std::getenv("STOKE_NVML_LIBRARY");
    const std::string path = env && *env ? env : "libnvidia-ml.so.1";
    // RTLD_LOCAL: NVML's symbols stay out of the global namespace.
    lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = ::dlerror();
      return "cannot open " + path + (e ? std::string(": ") + e : std::string());
    }
    std::string missing;
    auto take = [&](auto& fn, const char* symbol, bool required) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, symbol));
      if (!fn && required && missing.empty()) missing = symbol;
    };
    take(init, "nvmlInit_v2", true);
    take(shutdown, "nvmlShutdown", true);
    take(handle_by_index, "nvmlDeviceGetHandleByIndex_v2", true);
    take(utilization, "nvmlDeviceGetUtilizationRates", true);
    take(memory, "nvmlDeviceGetMemoryInfo", true);
    take(power_mw, "nvmlDeviceGetPowerUsage", true);
    take(name, "nvmlDeviceGetName", false);
    take(error_string, "nvmlErrorString", false);
    if (!missing.empty()) return path + " has no " + missing + " (not NVML, or too old a driver)";
    if (const nvmlReturn_t rc = init(); rc != 0) return failed("nvmlInit_v2", rc);
    initialised = true;
    if (index < 0) return "no GPU index " + std::to_string(index);
    if (const nvmlReturn_t rc = handle_by_index(static_cast<unsigned>(index), &device); rc != 0)
      return failed("nvmlDeviceGetHandleByIndex_v2(" + std::to_string(index) + ")", rc);
    return "";
  }

  std::string failed(const std::string& call, nvmlReturn_t rc) const {
    const char* text = error_string ? error_string(rc) : nullptr;
    return call + " failed: " + (text ? std::string(text) + " " : std::string()) + "(NVML error " +
           std::to_string(rc) + ")";
  }

  std::string device_name() const {
    char buf[kNameBufferSize] = {};
    if (!name || name(device, buf, kNameBufferSize) != 0) return "";
    buf[kNameBufferSize - 1] = '\0';
    return buf;
  }

  void close() {
    if (initialised) shutdown();  // NVML counts inits: this undoes only ours
    initialised = false;
    if (lib) ::dlclose(lib);
    lib = nullptr;
  }
};

GpuSampler::GpuSampler(int device_index, double period_seconds, Trace* trace)
    : trace_(trace), nvml_(std::make_unique<Nvml>()) {
  // Never a busy loop: a period under 1 ms becomes 1 ms, one that is not a number the default.
  const double seconds = std::isfinite(period_seconds) ? std::max(period_seconds, 0.001) : 0.1;
  period_ = std::chrono::duration_cast<Trace::Clock::duration>(std::chrono::duration<double>(seconds));
  reason_ = nvml_->open(device_index);
  if (!reason_.empty()) {
    nvml_->close();
    return;
  }
  sum_.name = nvml_->device_name();
  active_ = true;
  // The first sample here, not on the thread: a job shorter than one period,
  // or stopped before the thread got going, still has one.
  sample_once();
  thread_ = std::thread([this] { run(); });
}

GpuSampler::~GpuSampler() {
  stop();
  nvml_->close();
}

void GpuSampler::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void GpuSampler::run() {
  std::unique_lock<std::mutex> lock(mu_);
  auto next = Trace::Clock::now() + period_;
  for (;;) {
    if (wake_.wait_until(lock, next, [&] { return stopping_; })) return;
    // NVML calls can take a millisecond or more: summary() does not wait on them.
    lock.unlock();
    sample_once();
    lock.lock();
    // Fixed cadence, but never a burst of catch-up samples after a stall.
    next = std::max(next + period_, Trace::Clock::now() + period_ / 2);
  }
}

void GpuSampler::sample_once() {
  const Trace::Clock::time_point now = Trace::Clock::now();
  // Each reading stands alone: a board without power readings (or a MIG
  // instance without utilization) still reports the rest.
  nvmlUtilization_t u{};
  nvmlMemory_t m{};
  unsigned int milliwatts = 0;
  const bool have_u = nvml_->utilization(nvml_->device, &u) == 0;
  const bool have_m = nvml_->memory(nvml_->device, &m) == 0;
  const bool have_p = nvml_->power_mw(nvml_->device, &milliwatts) == 0;
  const double watts = milliwatts / 1000.0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (have_u) {
      ++sum_.samples;
      utilization_total_ += u.gpu;
      memory_utilization_total_ += u.memory;
      sum_.utilization_max = std::max(sum_.utilization_max, static_cast<double>(u.gpu));
    }
    if (have_m) {
      ++sum_.memory_samples;
      sum_.memory_used_max_bytes = std::max<uint64_t>(sum_.memory_used_max_bytes, m.used);
      sum_.memory_total_bytes = m.total;
    }
    if (have_p) {
      ++sum_.power_samples;
      power_total_w_ += watts;
      sum_.power_max_w = std::max(sum_.power_max_w, watts);
    }
  }
  if (!trace_) return;
  if (have_u) trace_->record_counter("gpu utilization %", now, u.gpu);
  if (have_m) trace_->record_counter("gpu memory used GiB", now, static_cast<double>(m.used) / kGiB);
  if (have_p) trace_->record_counter("gpu power W", now, watts);
}

GpuSamplerSummary GpuSampler::summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  GpuSamplerSummary s = sum_;
  if (s.samples > 0) {
    s.utilization_mean = utilization_total_ / static_cast<double>(s.samples);
    s.memory_utilization_mean = memory_utilization_total_ / static_cast<double>(s.samples);
  }
  if (s.power_samples > 0) s.power_mean_w = power_total_w_ / static_cast<double>(s.power_samples);
  return s;
}

}  // namespace stoke
