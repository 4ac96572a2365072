#include <string>

#include "core/error.h"
#include "cuda/cuda_internal.h"

namespace stoke::cuda {

void check_cuda(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so the caller can retry smaller
    throw OutOfMemoryError(std::string(call) + " failed: the GPU is out of memory");
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
