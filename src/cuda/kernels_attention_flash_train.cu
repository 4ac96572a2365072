// Flash-style attention for training on the tensor cores (bf16/f16, head dim
// <= 128, padded with zeros to 16/32/64/128 in shared memory as the
// inference kernel does): the forward with lse and dropout, and a
// deterministic backward (no atomics) that recomputes the probabilities
// from lse, as FlashAttention-2 does. The formulas are
// src/cpu/ref/ref_attention.cc's; the `Scores` policies (a sliding window,
// MPNet's per-head bias) and the dropout mask (mask_factor's Philox element
// index) are kernels_attention_exact.cuh's, so the CPU, the exact kernels and
// these draw the very same masks.
//
// Every kernel is a block of 4 warps over one (sequence, 64-row tile, head),
// from the work list of flash_tiles.h, and walks the 64-row tiles of the
// other side that its rows can see (all, or the window's): O(tile) shared
// memory whatever the sequence's length, every K/V (or Q/dO) tile read once
// per block instead of once per row.
//   forward  (query tile): S = Q K^T (WMMA), online softmax in f32 (running
//            max and sum per row), O += (P * mask) V (WMMA); the sum that
//            normalises stays undropped; lse = max + log(sum), natural log.
//            The output and the running statistics in registers, the
//            probabilities over the score rows (kernels_flash_common.cuh):
//            48 KiB of shared memory at d = 64, 4 blocks per SM.
//   dK/dV    (key tile; K, V stay in shared memory): for each query tile,
//            S^T = K Q^T, dP^T = V dO^T (WMMA), in f32 P = exp(S*scale + bias
//            - lse), dS = P * (dP * mask - D); dV += (P*mask)^T dO and
//            dK += dS^T Q (WMMA), the sums in accumulator fragments across the
//            loop (the backward never rescales, so no fragment layout is
//            needed); dK scaled by 1/sqrt(d) at the end.
//   dQ       (query tile): for each key tile, S and dP again, dS as above,
//            dQ += dS K (WMMA), scaled at the end.
// D_i = dout_i . out_i is computed once per (token, head) into the
// backend's reduction workspace (row_dots_kernel) before the dK/dV and dQ
// kernels read it — a fixed buffer, nothing allocated while a graph is
// captured; where the workspace is too small (millions of tokens), each
// block forms it where it is used (the dQ block once, a dK/dV block once per
// query tile), with the same bits.
//
// Precision: S, dP and every sum are f32 (WMMA accumulators); P (for P V and
// dV), dS (for dK and dQ) and an f32 dout (the trainer's gradients are f32;
// dout may also be the activation dtype, and so may dqkv) are rounded to the
// activation dtype for the MMAs, as FlashAttention does: a relative error of at most 2^-8 (bf16) /
// 2^-11 (f16) per element, random in sign, which the sums over keys/queries
// average rather than grow (tests/ops/test_op_table.cc states what that
// means for the tolerances).
// f16 has the narrower range: an f32 dout or a dS past 65504 (a loss scale
// too high) becomes inf in its 16-bit copy, and f16 training's loss scaler
// skips that step and halves the scale, as it does for torch's f16 grads.
//
// Each dK/dV and dQ element is one warp's fixed sequence of MMAs over the
// tiles in order: the backward is deterministic run to run.
#include <mma.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "cuda/flash_tiles.h"
#include "cuda/kernels_attention_flash_train.h"
#include "cuda/kernels_attention_exact.cuh"
#include "cuda/kernels_flash_common.cuh"

namespace stoke::cuda {

namespace {

using namespace nvcuda;
using attention_exact::Dropout;
using attention_exact::RelposScores;
using attention_exact::WindowScores;
using flash::flash_ld;
using flash::from_float;
using flash::kBc;
using flash::kBr;
using flash::kWarps;
using flash::load_tile;
using flash::to_float;
using flash_tiles::kTile;

static_assert(kBr == kTile && kBc == kTile, "the work list's tiles are the kernels' tiles");
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Shared-memory leading dimensions, padded past the width so the rows a WMMA
// load or store walks start in different banks; every fragment pointer stays
// 32-byte aligned and every leading dimension a multiple of 8 (16-bit) or 4
// (f32), WMMA's rules.
constexpr int kLdP = kBc + 8;  // the backward's 64-wide 16-bit rows: (P * mask)^T, dS
constexpr int kLdF = 16 + 4;   // a warp's 16x16 f32 blocks of S and dP
template <int DP>
__host__ __device__ constexpr int ld_out() { return DP + 4; }  // the backward's f32 staging of dQ / dK / dV rows

// The forward: Q, K, V (16-bit), one f32 score row per query (the register
// layout of kernels_flash_common.cuh), the tile's keep flags.
template <int DP>
constexpr size_t forward_smem_bytes() {
  return size_t{2} * (kBr + 2 * kBc) * flash_ld<DP>() + size_t{4} * kBr * flash::kLdS + size_t{kBr} * kBc;
}
// Both backward kernels: Q, dO, K, V tiles (16-bit), the warps' f32 S and dP
// blocks, lse and D of the query tile; dK/dV adds P*mask^T and dS^T (16-bit,
// 64 x 64), dQ adds dS.
template <int DP>
constexpr size_t backward_common_bytes() {
  return size_t{2} * 4 * kTile * flash_ld<DP>() + size_t{4} * (kWarps * 2 * 16 * kLdF + 2 * kTile);
}
template <int DP>
constexpr size_t dkv_smem_bytes() { return backward_common_bytes<DP>() + size_t{2} * 2 * kTile * kLdP; }
template <int DP>
constexpr size_t dq_smem_bytes() { return backward_common_bytes<DP>() + size_t{2} * kTile * kLdP; }
// The f32 staging of a block's 64 x DP result fits in its K and V tiles.
static_assert(4 * kTile * ld_out<128>() <= 2 * 2 * kTile * flash_ld<128>(), "staging fits K and V");
static_assert(4 * kTile * ld_out<16>() <= 2 * 2 * kTile * flash_ld<16>(), "staging fits K and V");

// Where one head's rows are in the packed tensors.
struct Heads {
  int heads, d;
  int64_t qkv_stride, o_stride;  // 3 * heads * d, heads * d
  int64_t q_col, k_col, v_col;   // this head's columns of qkv (its out / dout columns are q_col's)
};
__device__ __forceinline__ Heads heads_of(int heads, int d, int h) {
  const int64_t q = int64_t{h} * d;
  return {heads, d, int64_t{3} * heads * d, int64_t{heads} * d, q, int64_t{heads} * d + q, int64_t{2} * heads * d + q};
}

// 16-byte row loads need 16-byte aligned rows: d a multiple of 8 and the
// tensor aligned (always so for the model's tensors). Block-uniform.
__device__ __forceinline__ bool rows_aligned(const void* p, int d) {
  return d % 8 == 0 && (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// ---- the forward ---------------------------------------------------------------

template <class T, int DP, class Scores>
__global__ void __launch_bounds__(kThreads, flash::min_blocks<DP>())
    flash_train_forward_kernel(T* out, float* lse, const T* qkv, const int32_t* cu, int B, int heads, int d,
                               float scale, Scores sc, Dropout dropout) {
  constexpr int LD = flash_ld<DP>(), SW = flash::kLdS, kTiles = DP / 16;
  extern __shared__ __align__(128) unsigned char smem[];
  T* q_s = reinterpret_cast<T*>(smem);                        // [kBr][LD]
  T* k_s = q_s + kBr * LD;                                    // [kBc][LD]
  T* v_s = k_s + kBc * LD;                                    // [kBc][LD]
  float* s_s = reinterpret_cast<float*>(v_s + kBc * LD);      // [kBr][SW] scores; then P * mask (16-bit) and P.V
  uint8_t* keep_s = reinterpret_cast<uint8_t*>(s_s + kBr * SW);  // [kBr][kBc] 1: the probability is kept

  const flash_tiles::Tile tile = flash_tiles::tile_of_slot(cu, B, blockIdx.x);
  const int first = cu[tile.b], len = cu[tile.b + 1] - first;
  if (tile.start >= len) return;  // a spare slot: block-uniform, before any barrier
  const int q0 = static_cast<int>(tile.start);
  const int h = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const Heads hc = heads_of(heads, d, h);
  const Dropout dr = attention_exact::with_step_read(dropout);
  const bool vec = rows_aligned(qkv, d);
  float* s_w = s_s + warp * 16 * SW;            // this warp's 16 score rows
  T* p_w = reinterpret_cast<T*>(s_w);           // its probabilities, 16-bit, leading dimension 2 SW

  load_tile<T, DP, LD>(q_s, qkv, first + q0, kBr, len - q0, hc.qkv_stride, hc.q_col, d, vec);
  // The register layout of kernels_flash_common.cuh: the running max (log2
  // units), sum and last rescale of the warp's 16 rows, and its output.
  float m_run[16], l_run[16];
  float o[kTiles][8];
  flash::start_rows<DP>(m_run, l_run, o);

  const flash_tiles::Range keys = flash_tiles::tiles_in_reach(q0, len, sc.reach());
  for (int k0 = keys.first; k0 < keys.end; k0 += kBc) {
    // K and V of the tile by cp.async, V landing while the keep flags, S and
    // the softmax are computed.
    __syncthreads();  // the previous tile's K, V and keep flags are no longer read (and Q is loaded)
    flash::load_tile_async<T, DP, LD>(k_s, qkv, first + k0, kBc, len - k0, hc.qkv_stride, hc.k_col, d, vec);
    __pipeline_commit();
    flash::load_tile_async<T, DP, LD>(v_s, qkv, first + k0, kBc, len - k0, hc.qkv_stride, hc.v_col, d, vec);
    __pipeline_commit();
    if (dr.p > 0.0f) {  // block-uniform
      // A thread per 4 consecutive keys of a row: one Philox call for the four.
      for (int g = threadIdx.x; g < kBr * kBc / 4; g += blockDim.x) {
        const int r = g / (kBc / 4), c0 = (g % (kBc / 4)) * 4;
        float m[4];
        attention_exact::mask_factors4(dr, int64_t{first} + q0 + r, h, heads, k0 + c0, m);
#pragma unroll
        for (int k = 0; k < 4; ++k) keep_s[r * kBc + c0 + k] = m[k] != 0.0f;
      }
    }
    __pipeline_wait_prior(1);  // this thread's K copies have landed
    __syncthreads();           // and every thread's (and the keep flags)

    flash::warp_scores<T, DP>(s_w, q_s + warp * 16 * LD, k_s);  // S = Q K^T for this warp's 16 rows

    // Online softmax over the tile, a warp per row: lanes take keys lane and
    // lane + 32; the row's probabilities (times the mask) go over its scores.
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const int row = warp * 16 + r;
      const float* srow = s_w + r * SW;
      const int qi = q0 + row, j0 = k0 + lane, j1 = k0 + lane + 32;
      // Rows past the sequence see nothing (and never index MPNet's bias).
      const bool see0 = qi < len && j0 < len && sc.sees(qi, j0);
      const bool see1 = qi < len && j1 < len && sc.sees(qi, j1);
      const float x0 = see0 ? sc.score(srow[lane] * scale, qi, j0, h) * kLog2e : -INFINITY;
      const float x1 = see1 ? sc.score(srow[lane + 32] * scale, qi, j1, h) * kLog2e : -INFINITY;
      const float m_old = m_run[r];
      // -inf only while the row has seen no key yet (a window's tile before
      // the row's reach, or a row past the sequence): then p = 0, alpha = 0.
      const float m_new = fmaxf(m_old, warp_max(fmaxf(x0, x1)));
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      float p0 = exp2f(x0 - m_use), p1 = exp2f(x1 - m_use);
      const float sum = warp_sum(p0 + p1);  // undropped: lse and the normalisation are dropout's "before"
      const float alpha = exp2f(m_old - m_use);
      if (dr.p > 0.0f) {
        p0 = keep_s[row * kBc + lane] ? p0 * dr.scale : 0.0f;
        p1 = keep_s[row * kBc + lane + 32] ? p1 * dr.scale : 0.0f;
      }
      l_run[r] = l_run[r] * alpha + sum;
      m_run[r] = m_new;
      __syncwarp();  // every lane has read the row's scores before any overwrites them
      T* prow = p_w + r * 2 * SW;
      prow[lane] = from_float<T>(p0);
      prow[lane + 32] = from_float<T>(p1);
      if (lane == 0) s_w[r * SW + flash::kAlphaCol] = alpha;  // read by every lane after the __syncwarp below
    }
    __pipeline_wait_prior(0);  // V
    __syncthreads();

    // O = O * alpha + (P * mask) V.
    flash::accumulate_pv<T, DP>(o, s_w, v_s,
                                [&](int u) { return s_w[flash::pv_row(lane, u) * SW + flash::kAlphaCol]; });
  }

  // Every real row sees at least its own key, so its sum is >= 1.
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int qi = q0 + warp * 16 + r;
    if (lane == 0 && qi < len) lse[(int64_t{first} + qi) * heads + h] = m_run[r] * kLn2 + logf(l_run[r]);
  }
  const int row0 = q0 + warp * 16;
  flash::store_output<T, DP>(o, l_run, out, int64_t{first} + row0, len - row0, hc.o_stride, hc.q_col, d);
}

// ---- the backward ----------------------------------------------------------------

// dout and dqkv are T or f32 (the trainer's gradients are f32): dout rows
// are rounded to T for the MMAs (as FlashAttention's dout is 16-bit), D and
// the stores take them as they are.
template <class T>
struct FlashBackward {
  void* dqkv;
  Elem dq_e;
  const void* dout;
  Elem dout_e;
  const T* qkv;
  const T* out;
  const float* lse;
  const float* row_dots;  // D[t * heads + h] = dout . out, computed ahead (row_dots_kernel); null: here
  const int32_t* cu;
  int B, heads, d;
  float scale;
  Dropout dr;
};

// D = dout . out of packed row t, head h, as one warp sums it (lanes take
// every 32nd column, then the warp's fixed tree): the same bits whether
// row_dots_kernel writes it ahead or load_row_stats forms it in place.
template <class T>
__device__ __forceinline__ float row_dot(const FlashBackward<T>& a, const Heads& hc, int64_t t) {
  const int lane = threadIdx.x & 31;
  const int64_t base = t * hc.o_stride + hc.q_col;
  float acc = 0.0f;
  for (int c = lane; c < hc.d; c += 32) acc += load(a.dout, a.dout_e, base + c) * to_float(a.out[base + c]);
  return warp_sum(acc);
}

// row_dots[t * heads + h] for every packed row and head: a warp each.
template <class T>
__global__ void __launch_bounds__(kThreads) row_dots_kernel(float* row_dots, FlashBackward<T> a, int64_t rows) {
  const int64_t w = blockIdx.x * int64_t{kWarps} + (threadIdx.x >> 5);
  if (w >= rows * a.heads) return;  // warp-uniform
  const int64_t t = w / a.heads;
  const int h = static_cast<int>(w % a.heads);
  const float v = row_dot(a, heads_of(a.heads, a.d, h), t);
  if ((threadIdx.x & 31) == 0) row_dots[w] = v;
}

// lse (log2 units) and D = dout . out of the 64 query rows from q0 into
// lse_s and d_s, a warp per row; 0 for rows past the sequence (they see nothing).
template <class T>
__device__ __forceinline__ void load_row_stats(const FlashBackward<T>& a, const Heads& hc, int first, int len, int q0,
                                               int h, float* lse_s, float* d_s) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int r = warp; r < kTile; r += kWarps) {
    const int qi = q0 + r;
    const int64_t t = int64_t{first} + qi;
    float dot = 0.0f;
    if (!a.row_dots && qi < len) dot = row_dot(a, hc, t);  // warp-uniform
    if (lane == 0) {
      d_s[r] = qi < len ? (a.row_dots ? a.row_dots[t * a.heads + h] : dot) : 0.0f;
      lse_s[r] = qi < len ? a.lse[t * a.heads + h] * kLog2e : 0.0f;
    }
  }
}

// Rows [first_row, first_row + 64) of one head's dout columns into a shared
// tile of T, as load_tile does; f32 dout is rounded to T here.
template <class T, int DP, int LD>
__device__ __forceinline__ void load_dout_tile(T* tile, const FlashBackward<T>& a, const Heads& hc, int64_t first_row,
                                               int valid, bool vec) {
  if (a.dout_e != Elem::f32) {  // T itself (block-uniform)
    load_tile<T, DP, LD>(tile, static_cast<const T*>(a.dout), first_row, kTile, valid, hc.o_stride, hc.q_col, hc.d, vec);
    return;
  }
  const float* dout = static_cast<const float*>(a.dout);
  for (int i = threadIdx.x; i < kTile * DP; i += blockDim.x) {
    const int r = i / DP, c = i % DP;
    tile[r * LD + c] = from_float<T>(c < hc.d && r < valid ? dout[(first_row + r) * hc.o_stride + hc.q_col + c] : 0.0f);
  }
}

// A warp's 16 x 16 block of S (or S^T) and dP (or dP^T): the products of
// rows [0, 16) of `x` and `y` (16 rows each, LD apart) with rows [0, 16) of
// `xt` and `yt` — S = x xt^T, dP = y yt^T — into f32 fs and fp (kLdF).
template <class T, int DP>
__device__ __forceinline__ void score_blocks(const T* x, const T* xt, const T* y, const T* yt, float* fs, float* fp) {
  constexpr int LD = flash_ld<DP>();
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> s, p;
  wmma::fill_fragment(s, 0.0f);
  wmma::fill_fragment(p, 0.0f);
#pragma unroll
  for (int kk = 0; kk < DP / 16; ++kk) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> bt;  // (k, n) at rows[n][k]: the transpose
    wmma::load_matrix_sync(a, x + kk * 16, LD);
    wmma::load_matrix_sync(bt, xt + kk * 16, LD);
    wmma::mma_sync(s, a, bt, s);
    wmma::load_matrix_sync(a, y + kk * 16, LD);
    wmma::load_matrix_sync(bt, yt + kk * 16, LD);
    wmma::mma_sync(p, a, bt, p);
  }
  wmma::store_matrix_sync(fs, s, kLdF, wmma::mem_row_major);
  wmma::store_matrix_sync(fp, p, kLdF, wmma::mem_row_major);
}

// P_ij (f32) of query qi and key j from its product and the row's lse (log2 units).
template <class Scores>
__device__ __forceinline__ float probability(const Scores& sc, float product, float scale, float lse2, int qi, int j,
                                             int len, int h) {
  const bool see = qi < len && j < len && sc.sees(qi, j);
  return see ? exp2f(sc.score(product * scale, qi, j, h) * kLog2e - lse2) : 0.0f;
}

// The warp's 16 accumulator rows (16 x DP) times `scale` into rows
// [row0, row0 + 16) of column block `col` of dqkv, through the warp's f32
// staging `stage` (16 x ld_out). Rows past the sequence are not written.
template <int DP>
__device__ __forceinline__ void store_rows(const wmma::fragment<wmma::accumulator, 16, 16, 16, float> (&acc)[DP / 16],
                                           float* stage, void* dqkv, Elem dq_e, const Heads& hc, int64_t col, int first,
                                           int row0, int len, float scale) {
  constexpr int LO = ld_out<DP>();
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int j = 0; j < DP / 16; ++j) wmma::store_matrix_sync(stage + j * 16, acc[j], LO, wmma::mem_row_major);
  __syncwarp();
  for (int i = lane; i < 16 * DP; i += 32) {
    const int r = i / DP, c = i % DP;
    if (c < hc.d && row0 + r < len)
      store(dqkv, dq_e, (int64_t{first} + row0 + r) * hc.qkv_stride + col + c, stage[r * LO + c] * scale);
  }
  __syncwarp();  // the staging is free again
}

// dK and dV of one 64-key tile: a block per (sequence, key tile, head).
template <class T, int DP, class Scores>
__global__ void __launch_bounds__(kThreads) flash_train_dkv_kernel(FlashBackward<T> a, Scores sc) {
  constexpr int LD = flash_ld<DP>();
  extern __shared__ __align__(128) unsigned char smem[];
  T* k_s = reinterpret_cast<T*>(smem);                      // [64][LD] this block's keys
  T* v_s = k_s + kTile * LD;                                // [64][LD] and values
  T* q_s = v_s + kTile * LD;                                // [64][LD] the query tile
  T* do_s = q_s + kTile * LD;                               // [64][LD] its dout rows
  T* pm_s = do_s + kTile * LD;                              // [64 keys][kLdP] (P * mask)^T
  T* ds_s = pm_s + kTile * kLdP;                            // [64 keys][kLdP] dS^T
  float* f_s = reinterpret_cast<float*>(ds_s + kTile * kLdP);  // [warp][2][16][kLdF] S^T, dP^T blocks
  float* lse_s = f_s + kWarps * 2 * 16 * kLdF;              // [64] the query rows' lse (log2 units)
  float* d_s = lse_s + kTile;                               // [64] their D

  const flash_tiles::Tile tile = flash_tiles::tile_of_slot(a.cu, a.B, blockIdx.x);
  const int first = a.cu[tile.b], len = a.cu[tile.b + 1] - first;
  if (tile.start >= len) return;  // a spare slot: block-uniform, before any barrier
  const int k0 = static_cast<int>(tile.start);
  const int h = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const Heads hc = heads_of(a.heads, a.d, h);
  const Dropout dr = attention_exact::with_step_read(a.dr);
  const bool vec_qkv = rows_aligned(a.qkv, a.d), vec_dout = rows_aligned(a.dout, a.d);
  float* fs = f_s + warp * 2 * 16 * kLdF;
  float* fp = fs + 16 * kLdF;

  load_tile<T, DP, LD>(k_s, a.qkv, first + k0, kTile, len - k0, hc.qkv_stride, hc.k_col, a.d, vec_qkv);
  load_tile<T, DP, LD>(v_s, a.qkv, first + k0, kTile, len - k0, hc.qkv_stride, hc.v_col, a.d, vec_qkv);
  // This warp's 16 keys' dK and dV, summed over every query tile.
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> dk[DP / 16], dv[DP / 16];
#pragma unroll
  for (int j = 0; j < DP / 16; ++j) {
    wmma::fill_fragment(dk[j], 0.0f);
    wmma::fill_fragment(dv[j], 0.0f);
  }

  const flash_tiles::Range queries = flash_tiles::tiles_in_reach(k0, len, sc.reach());
  for (int i0 = queries.first; i0 < queries.end; i0 += kTile) {
    __syncthreads();  // the previous query tile is no longer read (the first time: K and V are loaded)
    load_tile<T, DP, LD>(q_s, a.qkv, first + i0, kTile, len - i0, hc.qkv_stride, hc.q_col, a.d, vec_qkv);
    load_dout_tile<T, DP, LD>(do_s, a, hc, first + i0, len - i0, vec_dout);
    load_row_stats(a, hc, first, len, i0, h, lse_s, d_s);
    __syncthreads();

    // The warp's 16 keys against the tile's queries, 16 at a time: S^T and
    // dP^T blocks in f32, then P * mask and dS (rounded to T) into the
    // warp's rows of pm_s and ds_s.
#pragma unroll 1
    for (int cb = 0; cb < kTile / 16; ++cb) {
      score_blocks<T, DP>(k_s + warp * 16 * LD, q_s + cb * 16 * LD, v_s + warp * 16 * LD, do_s + cb * 16 * LD, fs,
                          fp);
      __syncwarp();
      // A lane per 4 consecutive keys of one query (one Philox call), twice.
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int g = lane + 32 * half, c = g >> 2, r0 = (g & 3) * 4;
        const int qi = i0 + cb * 16 + c, jb = k0 + warp * 16 + r0;
        float m[4];
        attention_exact::mask_factors4(dr, int64_t{first} + qi, h, a.heads, jb, m);
        const float lse2 = lse_s[cb * 16 + c], Di = d_s[cb * 16 + c];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = r0 + e;
          const float p = probability(sc, fs[r * kLdF + c], a.scale, lse2, qi, jb + e, len, h);
          const float ds = p * (fp[r * kLdF + c] * m[e] - Di);
          pm_s[(warp * 16 + r) * kLdP + cb * 16 + c] = from_float<T>(p * m[e]);
          ds_s[(warp * 16 + r) * kLdP + cb * 16 + c] = from_float<T>(ds);
        }
      }
      __syncwarp();  // fs, fp are read; pm_s and ds_s rows are written
    }

    // dV += (P * mask)^T dO, dK += dS^T Q over the tile's 64 queries.
#pragma unroll
    for (int j = 0; j < DP / 16; ++j) {
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> x;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> y;
        wmma::load_matrix_sync(x, pm_s + warp * 16 * kLdP + kk * 16, kLdP);
        wmma::load_matrix_sync(y, do_s + kk * 16 * LD + j * 16, LD);
        wmma::mma_sync(dv[j], x, y, dv[j]);
        wmma::load_matrix_sync(x, ds_s + warp * 16 * kLdP + kk * 16, kLdP);
        wmma::load_matrix_sync(y, q_s + kk * 16 * LD + j * 16, LD);
        wmma::mma_sync(dk[j], x, y, dk[j]);
      }
    }
  }

  __syncthreads();  // every warp is done with K and V: their space stages the results
  float* stage = reinterpret_cast<float*>(smem) + warp * 16 * ld_out<DP>();
  store_rows<DP>(dk, stage, a.dqkv, a.dq_e, hc, hc.k_col, first, k0 + warp * 16, len, a.scale);
  store_rows<DP>(dv, stage, a.dqkv, a.dq_e, hc, hc.v_col, first, k0 + warp * 16, len, 1.0f);
}

// dQ of one 64-query tile: a block per (sequence, query tile, head).
template <class T, int DP, class Scores>
__global__ void __launch_bounds__(kThreads) flash_train_dq_kernel(FlashBackward<T> a, Scores sc) {
  constexpr int LD = flash_ld<DP>();
  extern __shared__ __align__(128) unsigned char smem[];
  T* k_s = reinterpret_cast<T*>(smem);                      // [64][LD] the key tile
  T* v_s = k_s + kTile * LD;                                // [64][LD] its values
  T* q_s = v_s + kTile * LD;                                // [64][LD] this block's queries
  T* do_s = q_s + kTile * LD;                               // [64][LD] and their dout rows
  T* ds_s = do_s + kTile * LD;                              // [64 queries][kLdP] dS
  float* f_s = reinterpret_cast<float*>(ds_s + kTile * kLdP);  // [warp][2][16][kLdF] S, dP blocks
  float* lse_s = f_s + kWarps * 2 * 16 * kLdF;              // [64] lse (log2 units)
  float* d_s = lse_s + kTile;                               // [64] D

  const flash_tiles::Tile tile = flash_tiles::tile_of_slot(a.cu, a.B, blockIdx.x);
  const int first = a.cu[tile.b], len = a.cu[tile.b + 1] - first;
  if (tile.start >= len) return;  // a spare slot: block-uniform, before any barrier
  const int q0 = static_cast<int>(tile.start);
  const int h = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const Heads hc = heads_of(a.heads, a.d, h);
  const Dropout dr = attention_exact::with_step_read(a.dr);
  const bool vec_qkv = rows_aligned(a.qkv, a.d), vec_dout = rows_aligned(a.dout, a.d);
  float* fs = f_s + warp * 2 * 16 * kLdF;
  float* fp = fs + 16 * kLdF;

  load_tile<T, DP, LD>(q_s, a.qkv, first + q0, kTile, len - q0, hc.qkv_stride, hc.q_col, a.d, vec_qkv);
  load_dout_tile<T, DP, LD>(do_s, a, hc, first + q0, len - q0, vec_dout);
  load_row_stats(a, hc, first, len, q0, h, lse_s, d_s);
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> dq[DP / 16];  // this warp's 16 rows
#pragma unroll
  for (int j = 0; j < DP / 16; ++j) wmma::fill_fragment(dq[j], 0.0f);

  const flash_tiles::Range keys = flash_tiles::tiles_in_reach(q0, len, sc.reach());
  for (int k0 = keys.first; k0 < keys.end; k0 += kTile) {
    __syncthreads();  // the previous key tile is no longer read (the first time: Q, dO, lse, D are loaded)
    load_tile<T, DP, LD>(k_s, a.qkv, first + k0, kTile, len - k0, hc.qkv_stride, hc.k_col, a.d, vec_qkv);
    load_tile<T, DP, LD>(v_s, a.qkv, first + k0, kTile, len - k0, hc.qkv_stride, hc.v_col, a.d, vec_qkv);
    __syncthreads();

    // The warp's 16 queries against the tile's keys, 16 at a time: S and dP
    // in f32, dS (rounded to T) into the warp's rows of ds_s.
#pragma unroll 1
    for (int cb = 0; cb < kTile / 16; ++cb) {
      score_blocks<T, DP>(q_s + warp * 16 * LD, k_s + cb * 16 * LD, do_s + warp * 16 * LD, v_s + cb * 16 * LD, fs,
                          fp);
      __syncwarp();
      // A lane per 4 consecutive keys of one query (one Philox call), twice.
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int g = lane + 32 * half, r = g >> 2, c0 = (g & 3) * 4;
        const int qi = q0 + warp * 16 + r, jb = k0 + cb * 16 + c0;
        float m[4];
        attention_exact::mask_factors4(dr, int64_t{first} + qi, h, a.heads, jb, m);
        const float lse2 = lse_s[warp * 16 + r], Di = d_s[warp * 16 + r];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = c0 + e;
          const float p = probability(sc, fs[r * kLdF + c], a.scale, lse2, qi, jb + e, len, h);
          ds_s[(warp * 16 + r) * kLdP + cb * 16 + c] = from_float<T>(p * (fp[r * kLdF + c] * m[e] - Di));
        }
      }
      __syncwarp();  // fs, fp are read; the ds_s rows are written
    }

    // dQ += dS K over the tile's 64 keys.
#pragma unroll
    for (int j = 0; j < DP / 16; ++j) {
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> x;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> y;
        wmma::load_matrix_sync(x, ds_s + warp * 16 * kLdP + kk * 16, kLdP);
        wmma::load_matrix_sync(y, k_s + kk * 16 * LD + j * 16, LD);
        wmma::mma_sync(dq[j], x, y, dq[j]);
      }
    }
  }

  __syncthreads();  // every warp is done with K and V: their space stages the result
  float* stage = reinterpret_cast<float*>(smem) + warp * 16 * ld_out<DP>();
  store_rows<DP>(dq, stage, a.dqkv, a.dq_e, hc, hc.q_col, first, q0 + warp * 16, len, a.scale);
}

// ---- setup and launch ------------------------------------------------------------

// The largest padded head dim whose three kernels fit the device's shared
// memory (set by attention_train_setup; 0 until then: the exact path).
int g_flash_train_max_dp = 0;

template <class K>
void set_smem(K kernel, size_t bytes) {
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
             "cudaFuncSetAttribute (training attention)");
}

template <class T, int DP, class Scores>
void set_smem_all() {
  set_smem(flash_train_forward_kernel<T, DP, Scores>, forward_smem_bytes<DP>());
  set_smem(flash_train_dkv_kernel<T, DP, Scores>, dkv_smem_bytes<DP>());
  set_smem(flash_train_dq_kernel<T, DP, Scores>, dq_smem_bytes<DP>());
}

template <int DP>
bool setup_dp(int optin) {
  const size_t most = std::max({forward_smem_bytes<DP>(), dkv_smem_bytes<DP>(), dq_smem_bytes<DP>()});
  if (most > static_cast<size_t>(optin)) return false;
  set_smem_all<__nv_bfloat16, DP, WindowScores>();
  set_smem_all<__nv_bfloat16, DP, RelposScores>();
  set_smem_all<__half, DP, WindowScores>();
  set_smem_all<__half, DP, RelposScores>();
  return true;
}

// Calls go(kernel-selecting tag) with the padded head dim for d as a constant.
template <class Go>
void with_dp(int d, Go&& go) {
  if (d <= 16)
    go(std::integral_constant<int, 16>{});
  else if (d <= 32)
    go(std::integral_constant<int, 32>{});
  else if (d <= 64)
    go(std::integral_constant<int, 64>{});
  else
    go(std::integral_constant<int, 128>{});
}

// The grid of a packed batch: the work list's slots by the heads.
dim3 grid_of(const TensorView& qkv, const TensorView& cu_seqlens, int heads) {
  const int64_t B = cu_seqlens.dim(0) - 1, T = qkv.dim(0);
  if (heads > 65535 || B > INT32_MAX / 2 || T > INT32_MAX / 2)
    throw Error(Errc::unsupported, "cuda training attention: at most 65535 heads and 2^30 tokens per call");
  return dim3(static_cast<unsigned>(flash_tiles::slot_count(T, B)), static_cast<unsigned>(heads));
}

template <class T, class Scores>
void forward_of(cudaStream_t s, const TensorView& out, const TensorView& lse, const TensorView& qkv,
                const TensorView& cu_seqlens, int heads, Scores sc, const Dropout& dr) {
  const dim3 grid = grid_of(qkv, cu_seqlens, heads);
  const int d = attention_exact::head_dim_of(qkv, heads);
  const float scale = 1.0f / sqrtf(static_cast<float>(d));
  const int B = static_cast<int>(cu_seqlens.dim(0) - 1);
  with_dp(d, [&](auto dp) {
    constexpr int DP = decltype(dp)::value;
    flash_train_forward_kernel<T, DP, Scores><<<grid, kThreads, forward_smem_bytes<DP>(), s>>>(
        out.as<T>(), lse.as<float>(), qkv.as<const T>(), cu_seqlens.as<const int32_t>(), B, heads, d, scale, sc, dr);
  });
  check_launch("flash_train_forward_kernel");
}

template <class T, class Scores>
void backward_of(cudaStream_t s, const TensorView& dqkv, const TensorView& dout, const TensorView& qkv,
                 const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens, int heads, Scores sc,
                 const Dropout& dr, const Scratch& scratch) {
  const dim3 grid = grid_of(qkv, cu_seqlens, heads);
  const int d = attention_exact::head_dim_of(qkv, heads);
  const int64_t rows = qkv.dim(0);
  // D ahead, once per (token, head), when the scratch holds it: the dK/dV
  // kernel would otherwise read every query tile's out rows once per key tile.
  float* row_dots = scratch.bytes >= static_cast<size_t>(rows * heads) * sizeof(float)
                        ? static_cast<float*>(scratch.data)
                        : nullptr;
  FlashBackward<T> a{dqkv.data,
                           elem_of(dqkv.dtype),
                           dout.data,
                           elem_of(dout.dtype),
                           qkv.as<const T>(),
                           out.as<const T>(),
                           lse.as<const float>(),
                           nullptr,
                           cu_seqlens.as<const int32_t>(),
                           static_cast<int>(cu_seqlens.dim(0) - 1),
                           heads,
                           d,
                           1.0f / sqrtf(static_cast<float>(d)),
                           dr};
  if (row_dots) {
    const int64_t warps = rows * heads;
    row_dots_kernel<T><<<static_cast<unsigned>((warps + kWarps - 1) / kWarps), kThreads, 0, s>>>(row_dots, a, rows);
    check_launch("flash_train row_dots_kernel");
    a.row_dots = row_dots;
  }
  with_dp(d, [&](auto dp) {
    constexpr int DP = decltype(dp)::value;
    flash_train_dkv_kernel<T, DP, Scores><<<grid, kThreads, dkv_smem_bytes<DP>(), s>>>(a, sc);
    check_launch("flash_train_dkv_kernel");
    flash_train_dq_kernel<T, DP, Scores><<<grid, kThreads, dq_smem_bytes<DP>(), s>>>(a, sc);
    check_launch("flash_train_dq_kernel");
  });
}

}  // namespace

void attention_train_setup() {
  int device = 0, optin = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
  int dp = 0;
  if (setup_dp<16>(optin)) dp = 16;
  if (dp == 16 && setup_dp<32>(optin)) dp = 32;
  if (dp == 32 && setup_dp<64>(optin)) dp = 64;
  if (dp == 64 && setup_dp<128>(optin)) dp = 128;
  g_flash_train_max_dp = dp;
}

bool flash_train_takes(const TensorView& qkv, const TensorView& out, int heads,
                       std::initializer_list<const TensorView*> grads) {
  if ((qkv.dtype != DType::bf16 && qkv.dtype != DType::f16) || out.dtype != qkv.dtype) return false;
  for (const TensorView* g : grads)
    if (g->dtype != qkv.dtype && g->dtype != DType::f32) return false;
  const int d = attention_exact::head_dim_of(qkv, heads);
  return d >= 1 && d <= g_flash_train_max_dp;
}

void launch_flash_attention_train(cudaStream_t s, const TensorView& out, const TensorView& lse,
                                  const TensorView& qkv, const TensorView& cu_seqlens, int heads, int window,
                                  const float* rel, int max_seqlen, const Ops::AttentionDropout& dropout) {
  const Dropout dr = attention_exact::dropout_of(dropout);
  auto go = [&](auto sc) {
    if (qkv.dtype == DType::bf16)
      forward_of<__nv_bfloat16>(s, out, lse, qkv, cu_seqlens, heads, sc, dr);
    else
      forward_of<__half>(s, out, lse, qkv, cu_seqlens, heads, sc, dr);
  };
  if (rel)
    go(RelposScores{rel, heads, max_seqlen});
  else
    go(WindowScores{window});
}

void launch_flash_attention_backward(cudaStream_t s, const TensorView& dqkv, const TensorView& dout,
                                     const TensorView& qkv, const TensorView& out, const TensorView& lse,
                                     const TensorView& cu_seqlens, int heads, int window, const float* rel,
                                     int max_seqlen, const Ops::AttentionDropout& dropout, const Scratch& scratch) {
  const Dropout dr = attention_exact::dropout_of(dropout);
  auto go = [&](auto sc) {
    if (qkv.dtype == DType::bf16)
      backward_of<__nv_bfloat16>(s, dqkv, dout, qkv, out, lse, cu_seqlens, heads, sc, dr, scratch);
    else
      backward_of<__half>(s, dqkv, dout, qkv, out, lse, cu_seqlens, heads, sc, dr, scratch);
  };
  if (rel)
    go(RelposScores{rel, heads, max_seqlen});
  else
    go(WindowScores{window});
}

}  // namespace stoke::cuda
