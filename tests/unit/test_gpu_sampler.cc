// The GPU sampler against a fake NVML (tests/support/fake_nvml.c) whose
// readings are fixed: 75% utilization (memory 40%), 2 GiB used of 8 GiB,
// 300000 mW. The summary must give back exactly those numbers, converted, and
// every way of not having NVML must leave the sampler off with a reason. The
// jobs' use of it (jobs/gpu_usage.h) is checked here too: the CLI cannot run a
// model on cuda:N yet, so no CLI test reaches it.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <stdlib.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/gpu_sampler.h"
#include "core/trace.h"
#include "jobs/gpu_usage.h"

namespace stoke {
namespace {

using namespace std::chrono_literals;

void use_nvml_library(const char* path) { ::setenv("STOKE_NVML_LIBRARY", path, 1); }

// The fake's call counters, read through a handle of the test's own: it keeps
// the library (and its counts) loaded after the sampler closes its handle.
struct FakeNvml {
  FakeNvml() : lib(::dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL)) {}
  ~FakeNvml() {
    if (lib) ::dlclose(lib);
  }
  int read(const char* counter) const {
    auto fn = reinterpret_cast<int (*)()>(::dlsym(lib, counter));
    return fn ? fn() : -1;
  }
  void* lib;
};

TEST(GpuSampler, MissingLibraryIsOffWithAReason) {
  use_nvml_library("/nonexistent/libnvidia-ml.so.1");
  GpuSampler sampler(0, 0.05);
  EXPECT_FALSE(sampler.active());
  EXPECT_NE(sampler.reason().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << sampler.reason();
  sampler.stop();  // harmless when off
  EXPECT_EQ(sampler.summary().samples, 0u);
}

TEST(GpuSampler, LibraryWithoutNvmlSymbolsIsOff) {
  use_nvml_library("libc.so.6");  // loads, but is not NVML
  GpuSampler sampler(0, 0.05);
  EXPECT_FALSE(sampler.active());
  EXPECT_NE(sampler.reason().find("nvmlInit_v2"), std::string::npos) << sampler.reason();
}

TEST(GpuSampler, FailedInitIsOffWithNvmlsWords) {
  use_nvml_library(FAKE_NVML_INIT_FAILS_PATH);
  GpuSampler sampler(0, 0.05);
  EXPECT_FALSE(sampler.active());
  EXPECT_NE(sampler.reason().find("nvmlInit_v2"), std::string::npos) << sampler.reason();
  EXPECT_NE(sampler.reason().find("Driver Not Loaded"), std::string::npos) << sampler.reason();
}

TEST(GpuSampler, NoSuchDeviceIsOffAndUndoesInit) {
  use_nvml_library(FAKE_NVML_PATH);
  FakeNvml fake;
  ASSERT_NE(fake.lib, nullptr) << ::dlerror();
  const int inits = fake.read("fake_nvml_inits"), shutdowns = fake.read("fake_nvml_shutdowns");
  {
    GpuSampler sampler(3, 0.05);  // the fake has GPU 0 only
    EXPECT_FALSE(sampler.active());
    EXPECT_NE(sampler.reason().find("nvmlDeviceGetHandleByIndex_v2(3)"), std::string::npos) << sampler.reason();
  }
  EXPECT_EQ(fake.read("fake_nvml_inits"), inits + 1);
  EXPECT_EQ(fake.read("fake_nvml_shutdowns"), shutdowns + 1);
}

TEST(GpuSampler, SummaryGivesBackTheFakesReadings) {
  use_nvml_library(FAKE_NVML_PATH);
  FakeNvml fake;
  ASSERT_NE(fake.lib, nullptr) << ::dlerror();
  const int calls_before = fake.read("fake_nvml_utilization_calls");
  const int shutdowns = fake.read("fake_nvml_shutdowns");
  Trace trace;
  GpuSamplerSummary s;
  {
    GpuSampler sampler(0, 0.05, &trace);
    ASSERT_TRUE(sampler.active()) << sampler.reason();
    EXPECT_EQ(sampler.reason(), "");
    std::this_thread::sleep_for(350ms);
    sampler.stop();
    s = sampler.summary();
    // Every utilization sample is one call into NVML, none lost or invented.
    EXPECT_EQ(static_cast<uint64_t>(fake.read("fake_nvml_utilization_calls") - calls_before), s.samples);
  }
  EXPECT_EQ(fake.read("fake_nvml_shutdowns"), shutdowns + 1);  // the destructor shuts NVML down

  EXPECT_EQ(s.name, "Fake GPU 8GB");
  EXPECT_GE(s.samples, 3u);  // one at construction, then one per 50 ms: ~7 unless the machine stalls
  EXPECT_EQ(s.memory_samples, s.samples);
  EXPECT_EQ(s.power_samples, s.samples);
  EXPECT_DOUBLE_EQ(s.utilization_mean, 75.0);
  EXPECT_DOUBLE_EQ(s.utilization_max, 75.0);
  EXPECT_DOUBLE_EQ(s.memory_utilization_mean, 40.0);
  EXPECT_EQ(s.memory_used_max_bytes, 2ull << 30);
  EXPECT_EQ(s.memory_total_bytes, 8ull << 30);
  EXPECT_DOUBLE_EQ(s.power_mean_w, 300.0);
  EXPECT_DOUBLE_EQ(s.power_max_w, 300.0);

  // One value per counter per sample, in the units their names give.
  const nlohmann::json doc = nlohmann::json::parse(trace.to_json());
  std::map<std::string, std::vector<double>> counters;
  for (const auto& e : doc.at("traceEvents"))
    if (e.value("ph", "") == "C")
      counters[e.at("name").get<std::string>()].push_back(e.at("args").at("value").get<double>());
  const std::map<std::string, double> expected = {
      {"gpu utilization %", 75.0}, {"gpu memory used GiB", 2.0}, {"gpu power W", 300.0}};
  for (const auto& [name, value] : expected) {
    ASSERT_EQ(counters[name].size(), s.samples) << name;
    for (double v : counters[name]) EXPECT_DOUBLE_EQ(v, value) << name;
  }
}

TEST(GpuSampler, StopDoesNotWaitOutThePeriod) {
  use_nvml_library(FAKE_NVML_PATH);
  GpuSampler sampler(0, 60.0);
  ASSERT_TRUE(sampler.active()) << sampler.reason();
  const auto t0 = std::chrono::steady_clock::now();
  sampler.stop();
  // A sleep-based loop would hold stop() for up to a minute; the bound is loose on purpose.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  sampler.stop();  // idempotent
  EXPECT_EQ(sampler.summary().samples, 1u);  // the one taken at construction
}

TEST(GpuSamplerInJobs, OnlyCudaDevicesAreSampled) {
  EXPECT_EQ(cuda_device_index("cuda:0"), 0);
  EXPECT_EQ(cuda_device_index("cuda:12"), 12);
  for (const char* name : {"cpu", "cuda", "cuda:", "cuda:x", "cuda:1x", "cuda:-1", "xcuda:0"})
    EXPECT_EQ(cuda_device_index(name), std::nullopt) << name;
  use_nvml_library(FAKE_NVML_PATH);  // NVML is there, yet a CPU run is not sampled
  EXPECT_EQ(JobGpuUsage("cpu", nullptr).finish(), std::nullopt);
  use_nvml_library("/nonexistent/libnvidia-ml.so.1");  // no NVML: silently off
  EXPECT_EQ(JobGpuUsage("cuda:0", nullptr).finish(), std::nullopt);
}

TEST(GpuSamplerInJobs, SummaryLineAndJsonFromTheFake) {
  use_nvml_library(FAKE_NVML_PATH);
  JobGpuUsage gpu("cuda:0", nullptr);
  const std::optional<GpuSamplerSummary> s = gpu.finish();  // the first sample is taken at construction
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(gpu_summary_line(*s), "gpu: util 75% mean (max 75%), memory 2.0 / 8.0 GiB, power 300 W mean");
  const nlohmann::ordered_json j = gpu_summary_json(*s);
  EXPECT_EQ(j.at("name"), "Fake GPU 8GB");
  EXPECT_EQ(j.at("samples"), s->samples);
  EXPECT_EQ(j.at("utilization_mean"), 75.0);
  EXPECT_EQ(j.at("utilization_max"), 75.0);
  EXPECT_EQ(j.at("memory_utilization_mean"), 40.0);
  EXPECT_EQ(j.at("memory_used_max_bytes"), 2ull << 30);
  EXPECT_EQ(j.at("memory_total_bytes"), 8ull << 30);
  EXPECT_EQ(j.at("power_mean_w"), 300.0);
  EXPECT_EQ(j.at("power_max_w"), 300.0);
}

TEST(GpuSamplerInJobs, ReadingsNvmlNeverGaveAreLeftOut) {
  GpuSamplerSummary s;  // a board that reports memory only
  s.memory_samples = 4;
  s.memory_used_max_bytes = 3ull << 29;  // 1.5 GiB
  s.memory_total_bytes = 16ull << 30;
  EXPECT_EQ(gpu_summary_line(s), "gpu: memory 1.5 / 16.0 GiB");
  const nlohmann::ordered_json j = gpu_summary_json(s);
  EXPECT_TRUE(j.at("utilization_mean").is_null());
  EXPECT_TRUE(j.at("power_mean_w").is_null());
  EXPECT_EQ(j.at("memory_used_max_bytes"), 3ull << 29);
}

}  // namespace
}  // namespace stoke
