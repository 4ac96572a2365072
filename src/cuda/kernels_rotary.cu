// rotary / rotary_backward: one block per token, threads across its
// (head, pair) list. The token's sequence is found by a binary search of
// cu_seqlens on the device (positions restart at 0 per sequence); cos and sin
// are the precise sincosf of the f32 angle (no fast-math intrinsics), so the
// result stays within f32 rounding of the CPU reference.
#include "cuda/cuda_internal.h"
#include "cuda/kernels.h"
#include "cuda/kernels_common.cuh"

namespace stoke::cuda {

namespace {

__global__ void rotary_kernel(void* x, Elem x_e, const int32_t* cu, int64_t B, const float* inv_freq, int64_t half,
                              int64_t C, int heads, int head_dim, bool interleaved, float scale, float sign) {
  const int64_t t = blockIdx.x;
  int64_t lo = 0, hi = B - 1;  // the last sequence b with cu[b] <= t
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (cu[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  const float p = static_cast<float>(t - cu[lo]);
  const int64_t pairs = int64_t{heads} * half;
  for (int64_t j = threadIdx.x; j < pairs; j += blockDim.x) {
    const int64_t h = j / half, i = j - h * half;
    const float angle = __fmul_rn(inv_freq[i], p);
    float s, c;
    sincosf(angle, &s, &c);
    c *= scale;
    s *= sign * scale;
    const int64_t base = t * C + h * head_dim;
    const int64_t ia = base + (interleaved ? 2 * i : i);
    const int64_t ib = base + (interleaved ? 2 * i + 1 : i + half);
    const float a = load(x, x_e, ia), b = load(x, x_e, ib);
    store(x, x_e, ia, a * c - b * s);
    store(x, x_e, ib, b * c + a * s);
  }
}

}  // namespace

void launch_rotary(cudaStream_t s, const TensorView& x, const TensorView& cu_seqlens, const TensorView& inv_freq,
                   const Ops::Rotary& rope, bool backward) {
  const int64_t T = x.dim(0), C = x.dim(1), half = inv_freq.dim(0), B = cu_seqlens.dim(0) - 1;
  if (T == 0 || half == 0 || rope.heads == 0 || B < 1) return;
  rotary_kernel<<<static_cast<unsigned>(T), 128, 0, s>>>(x.data, elem_of(x.dtype), cu_seqlens.as<const int32_t>(), B,
                                                         inv_freq.as<const float>(), half, C, rope.heads,
                                                         rope.head_dim, rope.interleaved, rope.scale,
                                                         backward ? -1.0f : 1.0f);
  check_launch("rotary_kernel");
}

}  // namespace stoke::cuda
