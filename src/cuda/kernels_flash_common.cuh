// The pieces the flash-style attention kernels share (the inference kernel
// in kernels_attention.cu, the training kernels in
// kernels_attention_flash_train.cu): 16-bit element conversion (both ways), the tile
// sizes, the flattened (sequence, 64-row block) work list, and loading one
// head's rows of the packed qkv into a zero-padded shared tile.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/flash_tiles.h"

namespace stoke::cuda::flash {

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

constexpr int kBr = 64;  // query rows per block (16 per warp)
constexpr int kBc = 64;  // keys per tile
constexpr int kWarps = 4;

// Sequence b's first slot in the work list of 64-row blocks: sequence b owns
// the slots from floor(cu[b] / 64) + b, at least ceil(len_b / 64) of them and
// at most one more (flash_tiles.h says why, and its CPU test checks it).
static_assert(kBr == flash_tiles::kTile, "the work list's tiles are the kernels' query blocks");
__device__ __forceinline__ int64_t first_slot(const int32_t* cu, int b) { return flash_tiles::first_slot(cu, b); }

// The largest b in [0, B) with key(b) <= x, for key nondecreasing in b and
// key(0) <= x: a block's sequence from its flattened index.
template <class Key>
__device__ __forceinline__ int last_at_or_below(int B, int64_t x, Key key) {
  int lo = 0, hi = B - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (key(mid) <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// Shared Q, K, V rows of a padded head dim DP (16-bit elements): 16 bytes past
// the width, so the rows a WMMA fragment walks start in different banks.
template <int DP>
__host__ __device__ constexpr int flash_ld() { return DP + 8; }

// Rows [r0, r0 + rows) of one head's columns [col, col + d) of qkv into a
// shared tile of rows x DP (leading dimension LD), zeros past d and past the
// sequence's `valid` rows. 16-byte loads where every row start is 16-byte
// aligned (d a multiple of 8 and qkv aligned: always so for the model's
// tensors), else element by element.
template <class T, int DP, int LD>
__device__ __forceinline__ void load_tile(T* tile, const T* qkv, int64_t first_row, int rows, int valid,
                                          int64_t stride, int64_t col, int d, bool vec) {
  const T zero = from_float<T>(0.0f);
  if (vec) {
    constexpr int kChunks = DP / 8;
    for (int i = threadIdx.x; i < rows * kChunks; i += blockDim.x) {
      const int r = i / kChunks, c = (i % kChunks) * 8;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (c < d && r < valid) v = *reinterpret_cast<const uint4*>(qkv + (first_row + r) * stride + col + c);
      *reinterpret_cast<uint4*>(tile + r * LD + c) = v;
    }
    return;
  }
  for (int i = threadIdx.x; i < rows * DP; i += blockDim.x) {
    const int r = i / DP, c = i % DP;
    tile[r * LD + c] = (c < d && r < valid) ? qkv[(first_row + r) * stride + col + c] : zero;
  }
}

}  // namespace stoke::cuda::flash
