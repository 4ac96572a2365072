// Per-thread CPU utilization, sampled from /proc: the evidence behind "the
// tokenizer threads were 98% busy while the device waited". A background
// thread reads utime+stime of every watched thread each interval and records
// the fraction of one core it used since the previous sample, as a trace
// counter "cpu <name>" and in memory.
//
// Linux only (/proc/self/task/<tid>/stat). Resolution is the kernel's clock
// tick (sysconf(_SC_CLK_TCK), usually 10 ms), so one 100 ms sample is good to
// about +-0.1; busy_fraction over a whole run is much finer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/trace.h"
#include "core/utilization_sample.h"

namespace stoke {

class CpuSampler {
 public:
  using Clock = Trace::Clock;

  // trace may be nullptr (samples are then kept in memory only). Sample times
  // are seconds from the trace's origin, or from construction without one.
  explicit CpuSampler(Trace* trace, std::chrono::milliseconds interval = std::chrono::milliseconds(100));
  ~CpuSampler();  // stops
  CpuSampler(const CpuSampler&) = delete;
  CpuSampler& operator=(const CpuSampler&) = delete;

  // Call from the thread to be watched, before or after start(). Names should
  // be unique per thread ("tokenizer-0"); calling twice from one thread keeps
  // the first name. A thread that exits is dropped at the next sample.
  void watch_current_thread(const std::string& name);
  void start();
  // Takes a last sample of every live thread, then joins the sampling thread.
  // Idempotent; start() after stop() resumes.
  void stop();

  std::vector<UtilizationSample> samples() const;
  // CPU seconds / wall seconds of the thread(s) called `name`, from when they
  // were watched to their last sample; 0 when never sampled or unknown.
  double busy_fraction(const std::string& name) const;
  // CPU seconds the thread(s) called `name` used from when they were watched
  // to their last sample; 0 when never sampled or unknown.
  double cpu_seconds(const std::string& name) const;

 private:
  struct Watched {
    std::string name;
    int tid = 0;
    int fd = -1;                // /proc/self/task/<tid>/stat, -1 once the thread is gone
    long first_ticks = 0, last_ticks = 0;
    Clock::time_point first_time, last_time;
  };
  void run();
  void sample_all(bool final_pass);  // with mu_ held

  Trace* trace_;
  std::chrono::milliseconds interval_;
  Clock::time_point origin_;
  double seconds_per_tick_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
  std::vector<Watched> watched_;
  std::vector<UtilizationSample> samples_;
};

}  // namespace stoke
