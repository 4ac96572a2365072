// The CPU sampler against the kernel's own per-thread clock: a spinning
// thread reads busy, a sleeping one idle, samples land in the trace as
// counters, and threads that exit are dropped without error.
#include <gtest/gtest.h>

#include <time.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/cpu_sampler.h"
#include "core/trace.h"
#include "doctor/trace_reader.h"

namespace stoke {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

TEST(CpuSampler, SpinningThreadIsBusySleepingThreadIsNot) {
  Trace trace;
  CpuSampler sampler(&trace, 50ms);
  sampler.start();

  // Each watched thread works for 300 ms, then waits until the sampler has
  // stopped, so the sampled window is [watch, stop] for both. The spinner
  // measures its own CPU time over that window: on a loaded machine it may
  // get less than a core, and the sampler must agree with the kernel, not
  // with an idealised 100%.
  std::atomic<int> done{0};
  std::atomic<bool> stopped{false};
  double spin_cpu = 0;
  Clock::time_point spin_begin;
  std::thread spinner([&] {
    spin_begin = Clock::now();
    const double cpu0 = thread_cpu_seconds();
    sampler.watch_current_thread("spinner");
    volatile uint64_t sink = 0;
    while (Clock::now() - spin_begin < 300ms) sink = sink + 1;
    spin_cpu = thread_cpu_seconds() - cpu0;
    done++;
    while (!stopped) std::this_thread::sleep_for(1ms);
  });
  std::thread sleeper([&] {
    sampler.watch_current_thread("sleeper");
    std::this_thread::sleep_for(300ms);
    done++;
    while (!stopped) std::this_thread::sleep_for(1ms);
  });
  // A thread that exits while being sampled: dropped, no error.
  std::thread quitter([&] {
    sampler.watch_current_thread("quitter");
    std::this_thread::sleep_for(20ms);
  });
  quitter.join();
  while (done < 2) std::this_thread::sleep_for(1ms);
  sampler.stop();
  const double wall = std::chrono::duration<double>(Clock::now() - spin_begin).count();
  stopped = true;
  spinner.join();
  sleeper.join();

  const double spin = sampler.busy_fraction("spinner");
  const double reference = spin_cpu / wall;  // the kernel's count (ns), over (almost) the same window
  const double sleep = sampler.busy_fraction("sleeper");
  std::printf("spinner busy %.3f (CLOCK_THREAD_CPUTIME_ID: %.3f), sleeper %.3f\n", spin, reference, sleep);
  EXPECT_NEAR(spin, reference, 0.15) << "sampler " << spin << " vs CLOCK_THREAD_CPUTIME_ID " << reference;
  // How much of a core the spinner gets is the scheduler's choice: with three
  // busy loops on two cores it was 0.23 (and the sampler said 0.23). So the
  // absolute bound holds when the machine gave it a core; the comparison with
  // the kernel's clock above is the test that always applies.
  if (reference > 0.85) {
    EXPECT_GT(spin, 0.7);
  }
  // Likewise: told apart from the sleeper when the spinner got some CPU (at
  // nice 10 under two builds it got 0.09 of a core, and the sampler said 0.06).
  if (reference > 0.3) {
    EXPECT_GT(spin, sleep + 0.1);
  }
  EXPECT_LT(sleep, 0.2);
  EXPECT_LT(sampler.busy_fraction("quitter"), 0.5);
  EXPECT_EQ(sampler.busy_fraction("nobody"), 0.0);

  int spinner_samples = 0, sleeper_samples = 0;
  for (const auto& s : sampler.samples()) {
    EXPECT_GE(s.fraction, 0.0);
    EXPECT_LE(s.fraction, 1.0);
    EXPECT_GT(s.t, 0.0);
    spinner_samples += s.thread == "spinner";
    sleeper_samples += s.thread == "sleeper";
  }
  EXPECT_GE(spinner_samples, 3);  // ~6 ticks of 50 ms in 300 ms, and tick jitter on a loaded machine
  EXPECT_GE(sleeper_samples, 3);

  // Every in-memory sample is a "cpu <name>" counter in the trace, and reads back.
  const std::string text = trace.to_json();
  const auto doc = nlohmann::json::parse(text);
  int counters = 0;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "C") {
      ++counters;
      EXPECT_EQ(e["name"].get<std::string>().rfind("cpu ", 0), 0u) << e.dump();
    }
  EXPECT_EQ(counters, static_cast<int>(sampler.samples().size()));
  const auto parsed = doctor::parse_trace(text, "trace");
  EXPECT_EQ(parsed.utilization.size(), sampler.samples().size());
}

TEST(CpuSampler, StopIsIdempotentAndWorksWithoutATrace) {
  CpuSampler sampler(nullptr, 10ms);
  sampler.watch_current_thread("main");
  sampler.watch_current_thread("main again");  // same thread: the first name stays
  sampler.start();
  std::this_thread::sleep_for(40ms);
  sampler.stop();
  sampler.stop();
  EXPECT_FALSE(sampler.samples().empty());
  for (const auto& s : sampler.samples()) EXPECT_EQ(s.thread, "main");
  EXPECT_EQ(sampler.busy_fraction("main again"), 0.0);
}

}  // namespace
}  // namespace stoke
