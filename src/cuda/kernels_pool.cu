// pool and pool_backward. pool: one block per sequence, threads across the hidden columns; sums in
// double over the sequence's rows, rounded once: a text with a run of one
// token sums near-equal rows hundreds of times, and an f32 running sum's
// roundings then line up instead of cancelling (as on the CPU:
// src/cpu/fast/fast_pool.cc). An empty sequence pools to zeros (as the CPU
// reference does). pool_backward: a thread per column of each sequence, every
// token's gradient written (no atomics).
#include "cuda/kernels.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_common.cuh"

namespace stoke::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void pool_kernel(float* out, const void* h, Elem h_e, const int32_t* cu, int64_t H, Pooling mode) {
  const int64_t b = blockIdx.x;
  const int64_t first = cu[b], len = cu[b + 1] - first;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    float v = 0.0f;
    if (len > 0) {
      switch (mode) {
        case Pooling::cls: v = load(h, h_e, first * H + i); break;
        case Pooling::lasttoken: v = load(h, h_e, (first + len - 1) * H + i); break;
        case Pooling::max:
          v = load(h, h_e, first * H + i);
          for (int64_t t = 1; t < len; ++t) v = fmaxf(v, load(h, h_e, (first + t) * H + i));
          break;
        case Pooling::mean:
        case Pooling::mean_sqrt_len: {
          double sum = 0.0;
          for (int64_t t = 0; t < len; ++t) sum += static_cast<double>(load(h, h_e, (first + t) * H + i));
          const double n = static_cast<double>(len);
          v = static_cast<float>(mode == Pooling::mean ? sum / n : sum / sqrt(n));
          break;
        }
      }
    }
    out[b * H + i] = v;
  }
}

// dh of sequence blockIdx.y, written in full, a thread per column.
__global__ void pool_backward_kernel(void* dh, Elem dh_e, const float* dout, const void* h, Elem h_e,
                                     const int32_t* cu, int64_t H, Pooling mode) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= H) return;
  const int64_t b = blockIdx.y, first = cu[b], len = cu[b + 1] - first;
  if (len == 0) return;
  const float g = dout[b * H + c];
  int64_t only = -1;  // the one token that gets g (cls, lasttoken, max); -1: all of them, scaled
  float each = 0.0f;
  switch (mode) {
    case Pooling::cls: only = 0; break;
    case Pooling::lasttoken: only = len - 1; break;
    case Pooling::max: {  // the first token holding the column's maximum
      only = 0;
      float best = load(h, h_e, first * H + c);
      for (int64_t t = 1; t < len; ++t) {
        const float v = load(h, h_e, (first + t) * H + c);
        if (v > best) {
          best = v;
          only = t;
        }
      }
      break;
    }
    case Pooling::mean: each = static_cast<float>(static_cast<double>(g) / static_cast<double>(len)); break;
    default: each = static_cast<float>(static_cast<double>(g) / sqrt(static_cast<double>(len))); break;
  }
  for (int64_t t = 0; t < len; ++t) store(dh, dh_e, (first + t) * H + c, only < 0 ? each : (t == only ? g : 0.0f));
}

}  // namespace

void launch_pool(cudaStream_t s, const TensorView& out, const TensorView& h, const TensorView& cu_seqlens,
                 Pooling mode) {
  const int64_t B = out.dim(0), H = out.dim(1);
  if (B == 0 || H == 0) return;
  pool_kernel<<<static_cast<unsigned>(B), 256, 0, s>>>(out.as<float>(), h.data, elem_of(h.dtype),
                                                       cu_seqlens.as<const int32_t>(), H, mode);
  check_launch("pool_kernel");
}

void launch_pool_backward(cudaStream_t s, const TensorView& dh, const TensorView& dout, const TensorView& h,
                          const TensorView& cu_seqlens, Pooling mode) {
  const int64_t T = dh.dim(0), H = dh.dim(1), B = cu_seqlens.dim(0) - 1;
  if (T == 0 || H == 0) return;
  check_cuda(cudaMemsetAsync(dh.data, 0, dh.bytes(), s), "cudaMemsetAsync");  // tokens of no sequence get 0
  if (B == 0) return;
  if (B > 65535) throw Error(Errc::unsupported, "cuda pool_backward: at most 65535 sequences per call");
  pool_backward_kernel<<<dim3(static_cast<unsigned>((H + kThreads - 1) / kThreads), static_cast<unsigned>(B)),
                         kThreads, 0, s>>>(dh.data, elem_of(dh.dtype), dout.as<const float>(), or_null(h),
                                           elem_of(h.dtype), cu_seqlens.as<const int32_t>(), H, mode);
  check_launch("pool_backward_kernel");
}

}  // namespace stoke::cuda
