#include "core/cpu_sampler.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace stoke {

namespace {

// utime + stime of one task, in clock ticks; -1 when it cannot be read (the
// thread has exited). The file is "pid (comm) state ppid ..."; comm may hold
// spaces and parentheses, so fields are counted from the last ')'. utime and
// stime are fields 14 and 15 (proc(5)), the 12th and 13th after the ')'.
long read_cpu_ticks(int fd) {
  char buf[1024];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* p = nullptr;
  for (ssize_t i = n - 1; i >= 0; --i)
    if (buf[i] == ')') {
      p = buf + i + 1;
      break;
    }
  if (!p) return -1;
  long utime = -1, stime = -1;
  for (int field = 3; field <= 15; ++field) {
    char* end = nullptr;
    while (*p == ' ') ++p;
    if (!*p) return -1;
    if (field == 14 || field == 15) {
      const long v = std::strtol(p, &end, 10);
      if (end == p) return -1;
      (field == 14 ? utime : stime) = v;
      p = end;
    } else {
      while (*p && *p != ' ') ++p;
    }
  }
  return utime + stime;
}

double seconds_between(Trace::Clock::time_point a, Trace::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

CpuSampler::CpuSampler(Trace* trace, std::chrono::milliseconds interval)
    : trace_(trace),
      interval_(std::max(interval, std::chrono::milliseconds(1))),
      origin_(trace ? trace->origin() : Clock::now()),
      seconds_per_tick_(1.0 / static_cast<double>(std::max(::sysconf(_SC_CLK_TCK), 1L))) {}

CpuSampler::~CpuSampler() {
  stop();
  for (Watched& w : watched_)
    if (w.fd >= 0) ::close(w.fd);
}

void CpuSampler::watch_current_thread(const std::string& name) {
  const int tid = static_cast<int>(::syscall(SYS_gettid));
  std::lock_guard<std::mutex> lock(mu_);
  for (const Watched& w : watched_)  // (a live entry with this tid is this thread, unless it exited unsampled)
    if (w.tid == tid && w.fd >= 0 && read_cpu_ticks(w.fd) >= 0) return;
  Watched w;
  w.name = name;
  w.tid = tid;
  // Held open for the thread's life: a read is one pread, and the descriptor
  // stays bound to this task even if the tid is later reused.
  const std::string path = "/proc/self/task/" + std::to_string(tid) + "/stat";
  w.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (w.fd < 0) return;  // no /proc: nothing to sample, and no error (sampling is best-effort)
  w.first_ticks = w.last_ticks = read_cpu_ticks(w.fd);
  if (w.first_ticks < 0) {
    ::close(w.fd);
    return;
  }
  w.first_time = w.last_time = Clock::now();
  watched_.push_back(std::move(w));
}

void CpuSampler::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void CpuSampler::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void CpuSampler::run() {
  std::unique_lock<std::mutex> lock(mu_);
  auto next = Clock::now() + interval_;
  for (;;) {
    const bool stopped = wake_.wait_until(lock, next, [&] { return stopping_; });
    sample_all(stopped);
    if (stopped) return;
    // Fixed cadence, but never a burst of catch-up samples after a stall.
    next = std::max(next + interval_, Clock::now() + interval_ / 2);
  }
}

void CpuSampler::sample_all(bool final_pass) {
  const Clock::time_point now = Clock::now();
  const double t = seconds_between(origin_, now);
  for (Watched& w : watched_) {
    if (w.fd < 0) continue;
    const long ticks = read_cpu_ticks(w.fd);
    if (ticks < 0) {  // the thread has exited: its last sample stands
      ::close(w.fd);
      w.fd = -1;
      continue;
    }
    const double dt = seconds_between(w.last_time, now);
    // The last sample at stop() may cover a sliver of time, where one clock
    // tick would read as 0% or 100%+: it still counts toward busy_fraction,
    // but is not drawn as a sample of its own.
    const bool emit = !final_pass || dt * 4 >= std::chrono::duration<double>(interval_).count();
    if (dt <= 0) continue;
    if (emit) {
      // One thread cannot use more than one core; tick rounding can say so.
      const double fraction = std::clamp(static_cast<double>(ticks - w.last_ticks) * seconds_per_tick_ / dt, 0.0, 1.0);
      samples_.push_back(UtilizationSample{w.name, t, fraction});
      if (trace_) trace_->record_counter("cpu " + w.name, now, fraction);
    }
    w.last_ticks = ticks;
    w.last_time = now;
  }
}

std::vector<UtilizationSample> CpuSampler::samples() const {
  std::lock_guard<std::mutex> lock(mu_);
  return samples_;
}

double CpuSampler::busy_fraction(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  double cpu = 0, wall = 0;
  for (const Watched& w : watched_) {
    if (w.name != name) continue;
    cpu += static_cast<double>(w.last_ticks - w.first_ticks) * seconds_per_tick_;
    wall += seconds_between(w.first_time, w.last_time);
  }
  return wall > 0 ? std::clamp(cpu / wall, 0.0, 1.0) : 0.0;
}

double CpuSampler::cpu_seconds(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  double cpu = 0;
  for (const Watched& w : watched_)
    if (w.name == name) cpu += static_cast<double>(w.last_ticks - w.first_ticks) * seconds_per_tick_;
  return cpu;
}

}  // namespace stoke
