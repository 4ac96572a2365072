// The pieces the flash-style attention kernels share (the inference kernel
// in kernels_attention.cu, the training kernels in
// kernels_attention_flash_train.cu): 16-bit element conversion (both ways), the tile
// sizes, the flattened (sequence, 64-row block) work list, and loading one
// head's rows of the packed qkv into a zero-padded shared tile, and the
// forward's register layout.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline_primitives.h>
#include <mma.h>

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

// load_tile through cp.async (16-byte copies that land in shared memory while
// the block computes) where the rows are 16-byte aligned (vec); padding
// chunks are stored directly, and an unaligned tile is loaded at once. The
// caller commits the copies as a group (__pipeline_commit), waits for them
// (__pipeline_wait_prior) and then passes a barrier before reading the tile.
template <class T, int DP, int LD>
__device__ __forceinline__ void load_tile_async(T* tile, const T* qkv, int64_t first_row, int rows, int valid,
                                                int64_t stride, int64_t col, int d, bool vec) {
  if (!vec) {
    load_tile<T, DP, LD>(tile, qkv, first_row, rows, valid, stride, col, d, vec);
    return;
  }
  constexpr int kChunks = DP / 8;
  for (int i = threadIdx.x; i < rows * kChunks; i += blockDim.x) {
    const int r = i / kChunks, c = (i % kChunks) * 8;
    T* dst = tile + r * LD + c;
    if (c < d && r < valid)
      __pipeline_memcpy_async(dst, qkv + (first_row + r) * stride + col + c, 16);
    else
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  }
}

// ---- the forward's register layout (both forward kernels) ----------------------
//
// A warp owns 16 query rows. Their running max, sum and last rescale factor
// are per-lane arrays of 16 (every lane holds the same values: the warp
// reductions hand each lane the result) — except that the training forward,
// with more live state (the score policy, dropout), keeps the rescale factor
// in its score row's padding (kAlphaCol) to stay within 128 registers. Their output, 16 x DP f32, is
// spread over the lanes: of each 16x16 column tile, lane l holds the 8
// elements at row (l / 16) + 2u, column l % 16 (u < 8) — o[DP / 16][8]. Shared
// memory holds one f32 score row per query row (kLdS: 16 bytes of padding,
// so the rows a WMMA fragment walks start in different banks); the warp
// writes its probabilities (16-bit) over the first half of its own score
// rows and stages each 16x16 tile of P.V beside them, at column kPvCol.

constexpr int kLdS = kBc + 4;
constexpr int kPvCol = kBc / 2;  // past the probabilities: kBc 16-bit elements = kBc / 2 floats
constexpr int kAlphaCol = kBc;  // past the scores: the row's last rescale factor
static_assert(kPvCol + 16 <= kLdS, "the P.V tile fits beside the probabilities in a score row");
static_assert(kAlphaCol < kLdS && kPvCol + 16 <= kAlphaCol, "the rescale factor has a column of its own");

// Blocks per SM the register budget is set for: 4 at d <= 64 (at most 128
// registers a thread), 2 at d = 128 (its output alone is 64 registers a thread).
template <int DP>
__host__ __device__ constexpr int min_blocks() { return DP <= 64 ? 4 : 2; }

// The row (of the warp's 16) of a lane's u-th output element.
__device__ __forceinline__ int pv_row(int lane, int u) { return (lane >> 4) + 2 * u; }

// v[pv_row(lane, u)] with constant indices into a register array (a
// lane-dependent index would put the array in local memory).
__device__ __forceinline__ float of_my_row(const float (&v)[16], int lane, int u) {
  float r = v[0];
#pragma unroll
  for (int k = 0; k < 8; ++k)
    if (k == u) r = (lane & 16) ? v[2 * k + 1] : v[2 * k];
  return r;
}

// The running max (-inf), sum and output (0) of a warp's 16 rows before the first key tile.
template <int DP>
__device__ __forceinline__ void start_rows(float (&m_run)[16], float (&l_run)[16], float (&o)[DP / 16][8]) {
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    m_run[r] = -INFINITY;
    l_run[r] = 0.0f;
  }
#pragma unroll
  for (int j = 0; j < DP / 16; ++j)
#pragma unroll
    for (int u = 0; u < 8; ++u) o[j][u] = 0.0f;
}

// S = Q K^T of a warp's 16 query rows (`q`: the first, flash_ld apart)
// against a tile of kBc keys (`k_s`), f32, into the warp's score rows s_w.
template <class T, int DP>
__device__ __forceinline__ void warp_scores(float* s_w, const T* q, const T* k_s) {
  using namespace nvcuda;
  constexpr int LD = flash_ld<DP>();
  for (int j = 0; j < kBc / 16; ++j) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> bt;  // K^T: (k, n) at K[n][k]
      wmma::load_matrix_sync(a, q + kk * 16, LD);
      wmma::load_matrix_sync(bt, k_s + j * 16 * LD + kk * 16, LD);
      wmma::mma_sync(acc, a, bt, acc);
    }
    wmma::store_matrix_sync(s_w + j * 16, acc, kLdS, wmma::mem_row_major);
  }
  __syncwarp();
}

// O = O * alpha + P V for a warp's 16 rows and a tile of kBc values (v_s):
// P is the warp's 16-bit probabilities over its score rows s_w, each 16x16
// tile of P V goes through s_w's P.V columns; alpha_of(u) is the rescale
// factor of the lane's u-th row (pv_row).
template <class T, int DP, class AlphaOf>
__device__ __forceinline__ void accumulate_pv(float (&o)[DP / 16][8], float* s_w, const T* v_s, AlphaOf alpha_of) {
  using namespace nvcuda;
  constexpr int LD = flash_ld<DP>();
  const int lane = threadIdx.x & 31;
  const T* p_w = reinterpret_cast<const T*>(s_w);
  float* pv_w = s_w + kPvCol;
#pragma unroll
  for (int j = 0; j < DP / 16; ++j) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> bv;
      wmma::load_matrix_sync(a, p_w + kk * 16, 2 * kLdS);
      wmma::load_matrix_sync(bv, v_s + kk * 16 * LD + j * 16, LD);
      wmma::mma_sync(acc, a, bv, acc);
    }
    wmma::store_matrix_sync(pv_w, acc, kLdS, wmma::mem_row_major);
    __syncwarp();
#pragma unroll
    for (int u = 0; u < 8; ++u) o[j][u] = o[j][u] * alpha_of(u) + pv_w[pv_row(lane, u) * kLdS + (lane & 15)];
    __syncwarp();  // read before the next tile's store
  }
}

// The warp's output rows divided by their sums, columns [0, d) of rows
// row0 + r (r < valid) of `out` from column `col` (row stride `stride`).
template <class T, int DP>
__device__ __forceinline__ void store_output(const float (&o)[DP / 16][8], const float (&l_run)[16], T* out,
                                             int64_t row0, int valid, int64_t stride, int64_t col, int d) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int u = 0; u < 8; ++u) {
    const int r = pv_row(lane, u);
    if (r >= valid) continue;
    const float l = of_my_row(l_run, lane, u);
#pragma unroll
    for (int j = 0; j < DP / 16; ++j) {
      const int c = j * 16 + (lane & 15);
      if (c < d) out[(row0 + r) * stride + col + c] = from_float<T>(o[j][u] / l);
    }
  }
}

}  // namespace stoke::cuda::flash
