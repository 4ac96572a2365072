// Device helpers shared by the kernels: element access in any activation
// dtype (f32, bf16, f16; arithmetic always in f32), block reductions, and the
// 1-D launch shape with its grid-stride loop.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace stoke::cuda {

// A dtype as kernels see it. LayerNorm, pooling and the element-wise kernels
// are memory-bound: a uniform switch per element costs nothing measurable,
// and one kernel then serves every dtype mix the op table allows.
enum class Elem : int { f32 = 0, bf16 = 1, f16 = 2 };

inline Elem elem_of(DType t) {
  return t == DType::bf16 ? Elem::bf16 : t == DType::f16 ? Elem::f16 : Elem::f32;
}

__device__ __forceinline__ float load(const void* p, Elem e, int64_t i) {
  switch (e) {
    case Elem::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case Elem::f16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

// v as an element of type e holds it (round to nearest even, as store writes
// it): what load would read back, without the round trip through memory.
__device__ __forceinline__ float rounded(Elem e, float v) {
  switch (e) {
    case Elem::bf16: return __bfloat162float(__float2bfloat16_rn(v));
    case Elem::f16: return __half2float(__float2half_rn(v));
    default: return v;
  }
}

// Round to nearest even, as the CPU kernels do.
__device__ __forceinline__ void store(void* p, Elem e, int64_t i, float v) {
  switch (e) {
    case Elem::bf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    case Elem::f16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every
// thread gets the total. `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(t);
}

// The same sums in double (the LayerNorm rows: kernels_layernorm.cu says why).
__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double block_sum(double v, double* scratch) {  // scratch: 32 doubles
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double t = lane < warps ? scratch[lane] : 0.0;
  return warp_sum(t);
}

// Max over the block, as block_sum.
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(t);
}

// 1D launches over n elements: enough blocks to fill the GPU, grid-stride loops.
inline unsigned blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

// The grid-stride loop over [0, n) of those launches.
#define STOKE_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

// An optional tensor's data as a kernel argument: null when it is empty.
inline const void* or_null(const TensorView& t) { return t.empty() ? nullptr : t.data; }

}  // namespace stoke::cuda
