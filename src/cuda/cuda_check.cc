#include <atomic>
#include <string>

#include "core/error.h"
#include "cuda/cuda_internal.h"
#include "cuda/device_errors.h"

namespace stoke::cuda {

namespace {
std::atomic<const char*> last_enqueued_op{nullptr};
}  // namespace

void set_last_op(const char* name) { last_enqueued_op.store(name, std::memory_order_relaxed); }
std::string last_op() {
  const char* name = last_enqueued_op.load(std::memory_order_relaxed);
  return name ? name : "";
}

void check_cuda(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  // The runtime also keeps a failed call's code as the thread's last error.
  // Clear it here, on every failure: otherwise the next launch check (the
  // eager fallback after a failed graph capture, a retry after OOM) reads
  // this stale code and reports a healthy launch as failed. A sticky error
  // (a kernel fault) is not cleared by this and is reported again anyway.
  cudaGetLastError();
  if (status == cudaErrorMemoryAllocation) {
    throw OutOfMemoryError(std::string(call) + " failed: the GPU is out of memory");
  }
  if (is_sticky_fault(status)) {
    const StickyFault fault{static_cast<int>(status), cudaGetErrorName(status), call, last_op()};
    note_sticky_fault(fault);
    throw CudaError(call, static_cast<int>(status), fault.code_name,
                    std::string(cudaGetErrorString(status)) +
                        (fault.op.empty() ? std::string() : ", after the op " + fault.op) +
                        "; a kernel faulted: this process's CUDA context is unusable until it restarts");
  }
  throw CudaError(call, static_cast<int>(status), cudaGetErrorName(status), cudaGetErrorString(status));
}

void check_cublas(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  if (status == CUBLAS_STATUS_ALLOC_FAILED)
    throw OutOfMemoryError(std::string(call) + " failed: cuBLASLt could not allocate memory");
  throw CudaError(call, static_cast<int>(status), cublasLtGetStatusName(status), cublasLtGetStatusString(status));
}

void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

}  // namespace stoke::cuda
