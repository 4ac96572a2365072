// A compute device as the model and the pipeline see it: memory, one ordered
// stream of work (copies and ops), events, and a count of every time the host
// waited for the device. The CPU backend runs its stream on an executor
// thread, so host/device overlap is as real on the CPU as on a GPU; the CUDA
// backend implements the same interface.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "core/error.h"

namespace stoke {

class Trace;

// Memory owned by a backend; freed when the handle goes.
class Buffer {
 public:
  virtual ~Buffer() = default;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 protected:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// A point in the stream: done once all work enqueued before it has finished.
class Event {
 public:
  virtual ~Event() = default;
};

// A recorded run of enqueued work, replayed as one launch (Backend::replay).
class Graph {
 public:
  virtual ~Graph() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // "cpu", "cuda:0"
  // True when device memory is host memory (the CPU backend): weights can then
  // be used where they lie (mmap'd safetensors), without a copy.
  virtual bool device_is_host() const = 0;
  // Device memory, and host memory for staging (pinned where the device has it).
  virtual std::unique_ptr<Buffer> allocate(size_t bytes) = 0;
  virtual std::unique_ptr<Buffer> allocate_host(size_t bytes) = 0;

  // Enqueued copies: the source must stay unchanged, and the destination
  // untouched, until an event recorded after the copy is done.
  virtual void copy_to_device(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* device_src, size_t bytes) = 0;

  virtual std::shared_ptr<Event> record_event() = 0;
  // True when the event is done; never waits, never counted.
  virtual bool event_done(const Event& event) = 0;
  // The host waits for the event: counted in host_syncs. Rethrows the first
  // error any enqueued work raised (errors are sticky, as on a GPU).
  virtual void wait(const Event& event) = 0;
  // Flow control, not a sync: the host has run ahead of the device and wants
  // to refill a staging buffer whose copy is still queued, so it waits until
  // `event` is done. Work enqueued after the event keeps the device busy
  // through this wait, so it is counted apart (throttle_waits), not in
  // host_syncs. Rethrows like wait.
  virtual void throttle(const Event& event) = 0;
  uint64_t throttle_waits() const { return throttle_waits_.load(std::memory_order_relaxed); }
  // Waits for everything enqueued so far (counted).
  void synchronize() { wait(*record_event()); }
  // Teardown only: waits for all enqueued work, never throws, not counted.
  // Whoever frees memory that enqueued work may still use calls this first.
  virtual void drain() noexcept = 0;

  // The op table; every op is enqueued on this backend's stream.
  virtual const Ops& ops() const = 0;

  // Runs fn on the device's own thread, in stream order, where the device has
  // one (the CPU backend's executor): data-parallel training hands a
  // gradient bucket to the communicator there, and waits there for the
  // all-reduces before the optimizer step, so the host never waits. A GPU
  // stream cannot run host code that blocks it this way (NCCL enqueues on the
  // stream instead): the default refuses.
  virtual bool can_enqueue_host() const { return false; }
  virtual void enqueue_host(const char* name, std::function<void()> fn) {
    (void)name;
    (void)fn;
    throw Error(Errc::unsupported, "backend " + this->name() + " cannot run host work in stream order");
  }

  // Seconds the device spent running work since the backend was made, or a
  // negative number when the backend cannot tell (the pipeline then judges the
  // device by how long the host waited for results).
  virtual double busy_seconds() const { return -1; }

  // How many host threads are busy right now beside the device (the
  // pipeline's tokenizer workers while they tokenize). A device that computes
  // on the host's own cores (the CPU backend) runs its kernels on the cores
  // left, so its thread team never waits at a barrier for a thread the OS
  // descheduled in favour of a tokenizer; a GPU ignores it. Enqueued: applies
  // to work enqueued after the call.
  virtual void set_host_load(int busy_host_threads) { (void)busy_host_threads; }
  // Graphs. A device that launches work (a GPU) can record the ops enqueued
  // between begin_capture() and end_capture() once, without running them,
  // and replay the recording later as one launch: the same kernels on the
  // same buffers with the same shapes. Copies are not recorded (enqueue them
  // around the replay). The CPU backend cannot (can_capture() is false).
  virtual bool can_capture() const { return false; }
  virtual void begin_capture() { no_graphs(); }
  virtual std::unique_ptr<Graph> end_capture() { no_graphs(); }
  virtual void replay(const Graph&) { no_graphs(); }

  // Records the device's work as spans of `trace` from now on (nullptr:
  // stop). Waits for the work enqueued so far first (not counted), so every
  // span of it is in the old trace when this returns. The trace must outlive
  // the recording.
  virtual void set_trace(Trace* trace) { (void)trace; }

  // Every host wait on device work since the backend was made.
  uint64_t host_syncs() const { return host_syncs_.load(std::memory_order_relaxed); }

  // Device memory as this backend's allocator holds it, in bytes: allocated
  // (handed out now), reserved (allocated + cached for reuse), peak (the most
  // ever allocated at once). All zero on a backend whose device memory is the
  // host's (the CPU: the process's own memory is what counts there).
  struct MemoryReport {
    size_t allocated = 0, reserved = 0, peak = 0;
  };
  virtual MemoryReport memory_report() const { return {}; }

  // GEMMs that ran on the backend's slow fallback kernel instead of its
  // vendor library (CUDA: an operand mix cuBLASLt does not take, or a shape
  // it found no algorithm for), by what asked for it, shape and why; counted
  // as enqueued (a graph's capture once, not its replays). Empty where none
  // did, and on backends without such a kernel. run.json and the doctor show it.
  struct GemmFallback {
    std::string op, shape, why;  // "linear_backward dw", "M4096 N768 K3072 BF16*F32->F32", "operand mix"
    uint64_t calls = 0;
  };
  virtual std::vector<GemmFallback> gemm_fallbacks() const { return {}; }

  // How much more memory allocate() could hand out now, as the device itself
  // reports it, and where the number comes from (said in the notes of whoever
  // plans by it: `--batch-size auto`). A GPU: free device memory plus what
  // the backend's own allocator holds cached for reuse; the CPU: the host's
  // available memory.
  struct FreeMemory {
    size_t bytes = 0;
    std::string source;  // e.g. "host MemAvailable", "cuda:0 cudaMemGetInfo free + stoke's cache"
  };
  virtual FreeMemory free_memory() const = 0;

 protected:
  [[noreturn]] void no_graphs() const {
    throw Error(Errc::unsupported, "backend " + name() + " cannot capture graphs");
  }
  void count_host_sync() { host_syncs_.fetch_add(1, std::memory_order_relaxed); }
  void count_throttle_wait() { throttle_waits_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> host_syncs_{0};
  std::atomic<uint64_t> throttle_waits_{0};
};

}  // namespace stoke
