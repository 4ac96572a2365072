// A plain GEMM for the shapes cuBLASLt offers no algorithm for (degenerate
// ones: a single row or column, as a one-text head or a regression head can
// be): a thread per output element, f32 accumulation. These products are
// tiny; correctness is all they need.
#include "cuda/kernels.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_common.cuh"

namespace stoke::cuda {

namespace {

__global__ void plain_gemm_kernel(void* out, Elem out_e, const void* a, Elem a_e, const void* w, Elem w_e,
                                  const void* bias, Elem bias_e, int64_t M, int64_t N, int64_t K, bool accumulate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < M * N; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = i / N, n = i % N;
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k) acc += load(a, a_e, m * K + k) * load(w, w_e, n * K + k);
    if (bias) acc += load(bias, bias_e, n);
    if (accumulate) acc += load(out, out_e, i);  // the residual, added after the product as the unfused add
    store(out, out_e, i, acc);
  }
}

}  // namespace

void launch_plain_gemm(cudaStream_t s, const TensorView& out, const TensorView& a, const TensorView& w,
                       const TensorView& bias, bool accumulate) {
  const int64_t M = a.dim(0), K = a.dim(1), N = w.dim(0);
  if (M == 0 || N == 0) return;
  plain_gemm_kernel<<<blocks_for(M * N, 256), 256, 0, s>>>(out.data, elem_of(out.dtype), a.data, elem_of(a.dtype),
                                                           w.data, elem_of(w.dtype), bias.empty() ? nullptr : bias.data,
                                                           elem_of(bias.dtype), M, N, K, accumulate);
  check_launch("plain_gemm_kernel");
}

}  // namespace stoke::cuda
