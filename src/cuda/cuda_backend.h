// The CUDA backend: device memory from a caching allocator, pinned host
// staging memory, a compute stream with copy streams (host->device and
// device->host) joined to it by events, cuBLASLt GEMMs and our own fused
// kernels, and graph capture/replay. Plain C++ header: callers need no CUDA
// headers (CUDA handles are kept behind `Impl`).
//
// Order: the Backend contract is one ordered stream. Copies run on their own
// streams (the copy engines), each ordered after the work enqueued before it
// and before the work enqueued after it, by events; the host never blocks on
// a copy (pinned staging), and it waits only in wait()/throttle()/drain().
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "cuda/device.h"

namespace stoke::cuda {

class CudaBackend final : public Backend {
 public:
  // Opens device `index` (throws Error(device) with one clear line when it is
  // not there) and makes its streams, cuBLASLt handle and GEMM workspace.
  explicit CudaBackend(int index);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override;
  bool device_is_host() const override { return false; }
  // Device memory: cached per size class, so a job's steady state never calls
  // cudaMalloc. Out of memory (after emptying the cache once) throws
  // OutOfMemoryError, which the pipeline answers by halving its token budget.
  std::unique_ptr<Buffer> allocate(size_t bytes) override;
  // Pinned (page-locked) host memory: copies from and to it are asynchronous.
  std::unique_ptr<Buffer> allocate_host(size_t bytes) override;
  void copy_to_device(void* device_dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* device_src, size_t bytes) override;
  std::shared_ptr<Event> record_event() override;
  bool event_done(const Event& event) override;
  void wait(const Event& event) override;
  void throttle(const Event& event) override;
  void drain() noexcept override;
  const Ops& ops() const override;

  // Times every op with a pair of events while a trace is attached
  // (op_timer.h): device spans on a "gpu" track, and busy_seconds().
  void set_trace(Trace* trace) override;
  double busy_seconds() const override;

  bool can_capture() const override { return true; }
  void begin_capture() override;
  std::unique_ptr<Graph> end_capture() override;
  void replay(const Graph& graph) override;

  const DeviceInfo& device() const { return info_; }
  // Bytes held by the allocator: in use, and cached for reuse.
  size_t bytes_in_use() const;
  size_t bytes_cached() const;
  MemoryReport memory_report() const override;
  std::vector<GemmFallback> gemm_fallbacks() const override;
  // cudaMemGetInfo's free bytes plus what the caching allocator holds for
  // reuse (it gives those out without asking the driver).
  FreeMemory free_memory() const override;

  struct Impl;  // streams, events, handles, the allocator (cuda_backend.cc)
  Impl& impl() const { return *impl_; }

 private:
  DeviceInfo info_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<Ops> ops_;
};

}  // namespace stoke::cuda
