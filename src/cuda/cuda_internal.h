// Inside the CUDA backend: the checked-call helpers and the state behind
// CudaBackend (streams, join events, cuBLASLt handle, allocator). Only files
// of src/cuda include this; everyone else sees cuda_backend.h.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/op_timer.h"

namespace stoke::cuda {

class GemmFallbackCounter;  // gemm_routes.h (kept out of the kernels' includes)

// A failed runtime call becomes a CudaError naming the call and the code; an
// allocation failure becomes OutOfMemoryError (recoverable).
void check_cuda(cudaError_t status, const char* call);
void check_cublas(cublasStatus_t status, const char* call);
// After a kernel launch: a bad launch configuration is reported at once.
void check_launch(const char* kernel);
// The op whose launches were enqueued last (a string literal; Launch sets
// it): what the report of a sticky fault names (device_errors.h).
void set_last_op(const char* name);
std::string last_op();

// Device memory, cached by size class. Freed blocks stay cached for the next
// allocation of the same class (the Backend contract: whoever frees memory
// that enqueued work may still use drains the backend first, so a cached
// block is never handed out under running work).
class CachingAllocator {
 public:
  explicit CachingAllocator(int device) : device_(device) {}
  ~CachingAllocator();
  void* allocate(size_t bytes, size_t* rounded);
  void release(void* ptr, size_t rounded);
  void empty_cache();
  size_t in_use() const;
  size_t cached() const;
  size_t peak() const;  // the most in use at once since the allocator was made

 private:
  static size_t size_class(size_t bytes);
  int device_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // size class -> cached blocks
  size_t in_use_ = 0, cached_ = 0, peak_ = 0;
};

struct CudaBackend::Impl {
  Impl() = default;
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  int device = 0;
  cudaStream_t compute = nullptr, h2d = nullptr, d2h = nullptr;
  // Joins between streams (an event's most recent record is what a wait sees,
  // so one reusable event per direction is enough).
  cudaEvent_t compute_tail = nullptr, h2d_tail = nullptr, d2h_tail = nullptr;
  // Order bookkeeping (host side, enqueueing thread only): copies not yet
  // joined into the compute stream, and whether a copy stream has already
  // waited for the compute stream's current tail.
  bool h2d_pending = false, d2h_pending = false;
  uint64_t compute_epoch = 0, h2d_seen_epoch = UINT64_MAX, d2h_seen_epoch = UINT64_MAX;
  bool capturing = false;

  cublasLtHandle_t lt = nullptr;
  void* gemm_workspace = nullptr;
  size_t gemm_workspace_bytes = 0;
  // The training reductions' scratch (kernels.h Scratch: the column
  // sums' partials, the embedding backward's sort), allocated once so that a
  // captured graph and every replay use the same buffer.
  void* reduce_workspace = nullptr;
  size_t reduce_workspace_bytes = 0;
  // The backward GEMMs' 16-bit copy of dy (gemm_routes.h: cublaslt_16bit_copy),
  // taken in row chunks that fit; allocated once, like the scratch above, so
  // captured graphs and their replays share it (the compute stream orders its users).
  void* convert_workspace = nullptr;
  size_t convert_workspace_bytes = 0;
  std::unique_ptr<GemmFallbackCounter> gemm_fallbacks;  // every GEMM that took the plain kernel
  std::shared_ptr<CachingAllocator> allocator;
  std::unique_ptr<OpTimer> timer;  // while a trace is attached

  // Around one op: its launches go to the compute stream, timed when a
  // trace is attached (not while capturing: a graph is timed as a whole).
  class Launch {
   public:
    Launch(Impl& impl, const char* name) : impl_(impl), name_(name), stream(impl.compute_stream()) {
      set_last_op(name);
      if (impl_.timer && !impl_.capturing) start_ = impl_.timer->begin();
    }
    ~Launch() {
      if (!start_) return;
      try {
        impl_.timer->end(name_, start_);
      } catch (...) {  // a failed event record: the op's own error is what matters
      }
    }
    Launch(const Launch&) = delete;
    Launch& operator=(const Launch&) = delete;

   private:
    Impl& impl_;
    const char* name_;
    cudaEvent_t start_ = nullptr;

   public:
    const cudaStream_t stream;
  };

  // Called before anything is enqueued on the compute stream: joins pending
  // copies, so the work sees (and does not overtake) them.
  cudaStream_t compute_stream();
  // Called before a copy on `stream`: the copy follows all earlier work.
  cudaStream_t copy_stream(bool to_device);
};

}  // namespace stoke::cuda
