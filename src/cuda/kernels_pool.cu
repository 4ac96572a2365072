// pool: one block per sequence, threads across the hidden columns; sums in
// double over the sequence's rows, rounded once: a text with a run of one
// token sums near-equal rows hundreds of times, and an f32 running sum's
// roundings then line up instead of cancelling (as on the CPU:
// src/cpu/fast/fast_pool.cc). An empty sequence pools to zeros (as the CPU
// reference does).
#include "cuda/kernels.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_common.cuh"

namespace stoke::cuda {

namespace {

__global__ void pool_kernel(float* out, const void* h, Elem h_e, const int32_t* cu, int64_t H, PoolingMode mode) {
  const int64_t b = blockIdx.x;
  const int64_t first = cu[b], len = cu[b + 1] - first;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    float v = 0.0f;
    if (len > 0) {
      switch (mode) {
        case PoolingMode::cls: v = load(h, h_e, first * H + i); break;
        case PoolingMode::lasttoken: v = load(h, h_e, (first + len - 1) * H + i); break;
        case PoolingMode::max:
          v = load(h, h_e, first * H + i);
          for (int64_t t = 1; t < len; ++t) v = fmaxf(v, load(h, h_e, (first + t) * H + i));
          break;
        case PoolingMode::mean:
        case PoolingMode::mean_sqrt_len: {
          double sum = 0.0;
          for (int64_t t = 0; t < len; ++t) sum += static_cast<double>(load(h, h_e, (first + t) * H + i));
          const double n = static_cast<double>(len);
          v = static_cast<float>(mode == PoolingMode::mean ? sum / n : sum / sqrt(n));
          break;
        }
      }
    }
    out[b * H + i] = v;
  }
}

}  // namespace

void launch_pool(cudaStream_t s, const TensorView& out, const TensorView& h, const TensorView& cu_seqlens,
                 PoolingMode mode) {
  const int64_t B = out.dim(0), H = out.dim(1);
  if (B == 0 || H == 0) return;
  pool_kernel<<<static_cast<unsigned>(B), 256, 0, s>>>(out.as<float>(), h.data, elem_of(h.dtype),
                                                       cu_seqlens.as<const int32_t>(), H, mode);
  check_launch("pool_kernel");
}

}  // namespace stoke::cuda
