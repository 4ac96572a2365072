// The CPU backend: device memory is host memory, and the "stream" is an
// executor thread that runs enqueued copies and ops in order. The host thread
// only enqueues, so reading, tokenizing and staging overlap with compute
// exactly as they would with a GPU, and host waits are counted the same way.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "backend/backend.h"
#include "core/trace.h"
#include "cpu/kernels.h"

namespace stoke::cpu {

class CpuBackend final : public Backend {
 public:
  // kernels: reference_kernels() or fast_kernels(), chosen once here.
  explicit CpuBackend(const Kernels& kernels);
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  bool device_is_host() const override { return true; }
  std::unique_ptr<Buffer> allocate(size_t bytes) override;
  std::unique_ptr<Buffer> allocate_host(size_t bytes) override;
  void copy_to_device(void* device_dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* device_src, size_t bytes) override;
  std::shared_ptr<Event> record_event() override;
  bool event_done(const Event& event) override;
  void wait(const Event& event) override;
  void throttle(const Event& event) override;
  void drain() noexcept override;
  const Ops& ops() const override { return *ops_; }
  // The host's MemAvailable (/proc/meminfo): device memory is host memory.
  FreeMemory free_memory() const override;

  // Runs fn on the executor, in stream order (what every op does). `name`
  // (a static string: the op) labels its span when a trace is attached.
  void enqueue(const char* name, std::function<void()> fn);
  bool can_enqueue_host() const override { return true; }
  void enqueue_host(const char* name, std::function<void()> fn) override { enqueue(name, std::move(fn)); }
  // Records a span per work item on the executor thread ("device" category)
  // from now on (nullptr: stop). The trace must outlive the backend's work.
  void set_trace(Trace* trace) override;
  // Kernels run on max(1, cores - busy_host_threads) OpenMP threads from here
  // on, never more than OMP_NUM_THREADS when the user set it (the team size is
  // set on the executor thread, in stream order).
  void set_host_load(int busy_host_threads) override;
  double busy_seconds() const override;
  const Kernels& kernels() const { return kernels_; }

 private:
  void run();

  const Kernels& kernels_;
  std::unique_ptr<Ops> ops_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  struct Work {
    const char* name;
    std::function<void()> fn;
  };
  std::deque<Work> queue_;
  std::atomic<Trace*> trace_{nullptr};
  std::atomic<int64_t> busy_ns_{0};         // executor time inside work items
  uint64_t enqueued_ = 0, completed_ = 0;  // sequence numbers: an event is a count
  std::exception_ptr error_;               // first failure; sticky
  bool stop_ = false;
  std::thread executor_;
};

}  // namespace stoke::cpu
