#include "cpu/cpu_backend.h"

#include <omp.h>

#include <chrono>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "core/error.h"

namespace stoke::cpu {

namespace {

// 64-byte aligned host memory: cache lines and AVX-512 vectors.
class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(size_t bytes) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    data_ = rounded ? std::aligned_alloc(64, rounded) : nullptr;
    if (rounded && !data_) throw OutOfMemoryError("cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
    bytes_ = bytes;
  }
  ~HostBuffer() override { std::free(data_); }
};

// An event is the number of work items enqueued before it.
class CpuEvent final : public Event {
 public:
  explicit CpuEvent(uint64_t seq) : seq(seq) {}
  const uint64_t seq;
};

// The op table: each op captures its views by value and runs on the executor
// under its own name (the trace's). Generated from backend/op_list.h.
class CpuOps final : public Ops {
 public:
  explicit CpuOps(CpuBackend& b) : b_(b), k_(b.kernels()) {}

#define STOKE_OP(name, params, args) \
  void name params const override { b_.enqueue(#name, [=, f = k_.name] { f args; }); }
#include "backend/op_list.h"
#undef STOKE_OP

 private:
  CpuBackend& b_;
  const Kernels& k_;
};

}  // namespace

CpuBackend::CpuBackend(const Kernels& kernels) : kernels_(kernels) {
  ops_ = std::make_unique<CpuOps>(*this);
  executor_ = std::thread([this] { run(); });
}

CpuBackend::~CpuBackend() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  executor_.join();
}

void CpuBackend::run() {
  for (;;) {
    Work work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop requested and all work done
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    bool skip;
    {
      std::lock_guard<std::mutex> lock(mu_);
      skip = error_ != nullptr;  // after a failure the stream only drains
    }
    if (!skip) {
      const auto t0 = std::chrono::steady_clock::now();
      try {
        work.fn();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
      const auto t1 = std::chrono::steady_clock::now();
      busy_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count(),
                         std::memory_order_relaxed);
      if (Trace* trace = trace_.load(std::memory_order_acquire)) trace->record(work.name, "device", t0, t1);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++completed_;
    }
    done_cv_.notify_all();
  }
}

void CpuBackend::set_host_load(int busy_host_threads) {
  // A user's OMP_NUM_THREADS is a ceiling we keep: the doctor's contention
  // advice names it, and TSan runs set 1 (libgomp is not instrumented).
  // Read on the calling thread, whose team size is still the environment's
  // (the executor's is the one set below).
  static const int user_ceiling = std::getenv("OMP_NUM_THREADS") != nullptr ? omp_get_max_threads() : 0;
  const int cores = omp_get_num_procs();
  int threads = std::max(1, cores - std::max(0, busy_host_threads));
  if (user_ceiling > 0) threads = std::min(threads, user_ceiling);
  enqueue("set threads", [threads] { omp_set_num_threads(threads); });
}

void CpuBackend::set_trace(Trace* trace) {
  drain();  // the work enqueued so far is recorded in the old trace (or none), never half in each
  trace_.store(trace, std::memory_order_release);
  if (trace) enqueue("name thread", [trace] { trace->name_thread("device"); });
}

void CpuBackend::enqueue(const char* name, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Work{name, std::move(fn)});
    ++enqueued_;
  }
  work_cv_.notify_one();
}

double CpuBackend::busy_seconds() const { return static_cast<double>(busy_ns_.load(std::memory_order_relaxed)) * 1e-9; }

Backend::FreeMemory CpuBackend::free_memory() const {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kb = 0;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:" && kb >= 0) return {static_cast<size_t>(kb) * 1024, "host MemAvailable"};
  // No /proc (not Linux): a modest guess, named as one.
  return {size_t{4} << 30, "no /proc/meminfo: assumed 4 GiB"};
}

std::unique_ptr<Buffer> CpuBackend::allocate(size_t bytes) { return std::make_unique<HostBuffer>(bytes); }
std::unique_ptr<Buffer> CpuBackend::allocate_host(size_t bytes) { return std::make_unique<HostBuffer>(bytes); }

void CpuBackend::copy_to_device(void* device_dst, const void* host_src, size_t bytes) {
  // An empty tensor's data may be null: memcpy's pointers may not be, even for 0 bytes.
  enqueue("copy to device", [=] {
    if (bytes) std::memcpy(device_dst, host_src, bytes);
  });
}

void CpuBackend::copy_to_host(void* host_dst, const void* device_src, size_t bytes) {
  enqueue("copy to host", [=] {
    if (bytes) std::memcpy(host_dst, device_src, bytes);
  });
}

std::shared_ptr<Event> CpuBackend::record_event() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::make_shared<CpuEvent>(enqueued_);
}

bool CpuBackend::event_done(const Event& event) {
  const auto& e = static_cast<const CpuEvent&>(event);
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ >= e.seq;
}

void CpuBackend::wait(const Event& event) {
  const auto& e = static_cast<const CpuEvent&>(event);
  count_host_sync();
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return completed_ >= e.seq; });
  if (error_) std::rethrow_exception(error_);
}

void CpuBackend::throttle(const Event& event) {
  const auto& e = static_cast<const CpuEvent&>(event);
  std::unique_lock<std::mutex> lock(mu_);
  if (completed_ < e.seq) count_throttle_wait();
  done_cv_.wait(lock, [&] { return completed_ >= e.seq; });
  if (error_) std::rethrow_exception(error_);
}

void CpuBackend::drain() noexcept {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = enqueued_;
  done_cv_.wait(lock, [&] { return completed_ >= target; });
}

}  // namespace stoke::cpu
