// MPNet's relative-position attention, whole: attention_relpos (inference),
// attention_relpos_train and attention_relpos_backward, as
// src/cpu/ref/ref_attention.cc defines them: the score of query i and key j
// carries the per-head bias rel[(j - i) + max_seqlen - 1, h]; the training
// forward writes lse and drops probabilities out with the CPU's Philox
// element index (kernels_attention_exact.cuh); the backward writes dqkv and
// drel.
//
// The forwards, dQ and dK/dV are the kernels of plain attention with the
// bias in the score: inference takes the exact kernel of kernels_attention.cu
// for every dtype (the flash inference kernel has no bias term); training
// takes the flash kernels (kernels_attention_flash_train.cu) for bf16/f16
// with head dim <= 128, else the exact ones (kernels_attention_exact.cuh).
// drel, on both paths, is this file's: dS recomputed per 64 x 64 tile pair
// and summed along its diagonals, deterministically (no atomics), through the
// backend's reduction workspace. drel's kernels come first, the op launchers
// after them.
//
// drel, the bias gradient: drel[r, h] = sum over sequences and queries i of
// dS_ij with j = i + r - (max_seqlen - 1), dS_ij = P_ij (m_ij (dout_i . v_j)
// - D_i), for every dtype: the products, P (from lse) and every sum in f32.
//
// The tiled path (relpos_drel_tiles.h has the scheme and its index math):
//   pass 1, a block of 256 threads per (sequence, 64-query tile, head): for
//   each 64-key tile, S = Q K^T and dP = dO V^T as one 64 x 64 tile pair,
//   each thread a 4 x 4 block of both (the head dim staged 32 columns at a
//   time, transposed, in shared memory: O(1) shared memory for any d); then
//   dS, its 127 diagonal sums in a fixed order, merged with the previous key
//   tile's and written as one partial per (query tile, distance);
//   pass 2, a thread per (distance, head): the partials of every query tile,
//   sequences and tiles in order.
// Each dS is computed once: per head, sum over sequences of ceil(len/64)^2
// tile pairs each staging 4 x 64 x d values (plus 2 x 64 x d per query tile
// for D), where the walk below reads 5 d values per (query, distance) pair:
// for sequences of length L, T L d / 16 + 2 T d loads instead of 5 T L d (at
// L = 128: 10 T d instead of 640 T d), as many FMAs (2 T L d).
//
// The fallback (the workspace does not hold even one head's partials: about
// (T/64 + B) x (max_seqlen + 64) x 4 bytes > 32 MiB, millions of tokens): a
// block per (distance, head) whose threads walk the packed query rows in a
// fixed stride, recompute dS_ij for the key at that distance, and sum in a
// fixed tree: O(max_seqlen * T * d) per head.
#include <algorithm>

#include "cuda/flash_tiles.h"
#include "cuda/kernels.h"
#include "cuda/kernels_attention_exact.cuh"
#include "cuda/kernels_attention_flash_train.h"
#include "cuda/relpos_drel_tiles.h"

namespace stoke::cuda {

using namespace attention_exact;  // the exact kernels' launchers and types

namespace {

// ---- drel

using relpos_drel::kTile;

constexpr int kPairThreads = 256;  // 16 x 16 threads, each a 4 x 4 block of the 64 x 64 tile pair
constexpr int kPairWarps = kPairThreads / 32;
constexpr int kChunk = 32;         // head-dim columns staged per step
// Staged chunks are transposed, [column][row]: a thread's 4 rows (or keys)
// of one column are one aligned float4. 72 floats a column: rows stay
// 16-byte aligned, and a warp's stores (8 rows x 4 columns) hit 32 banks.
constexpr int kLdT = kTile + 8;
// dS rows for the diagonal sums: 65 floats, so the 32 lanes of a warp (16
// diagonals, two halves each) read from different banks or nearly so.
constexpr int kLdS = kTile + 1;
constexpr int kSumThreads = 128;

static_assert(kPairThreads == (kTile / 4) * (kTile / 4), "a thread per 4 x 4 block");
static_assert(kPairThreads >= 2 * (2 * kTile - 1), "two threads per diagonal");
static_assert(kTile * kLdS <= 2 * kChunk * kLdT, "dS fits the Q and dO chunks it replaces");

struct PairSmem {
  union {
    struct {
      float q[kChunk][kLdT], g[kChunk][kLdT], k[kChunk][kLdT], v[kChunk][kLdT];  // Q, dO, K, V chunks
    } t;
    float ds[kTile][kLdS];  // the tile pair's dS, after its products
  } u;
  float lse[kTile], D[kTile];  // the query tile's rows
  float carry[2][kTile - 1];   // diagonals 1 .. 63 of the previous key tile (by key tile parity)
};

// Pass 1. part: [slots][heads of this pass][E] f32; h0: the pass's first head.
__global__ void __launch_bounds__(kPairThreads, 2)
    drel_partials_kernel(Backward a, RelposScores sc, float* part, int h0, int pass_heads, int64_t E) {
  __shared__ __align__(16) PairSmem sm;
  const flash_tiles::Tile tile = flash_tiles::tile_of_slot(a.cu, a.B, blockIdx.x);
  const int first = a.cu[tile.b], len = a.cu[tile.b + 1] - first;
  // A spare slot, or a sequence past max_seqlen (outside the op's contract:
  // its row would not fit): block-uniform, before any barrier; pass 2
  // reads neither.
  if (tile.start >= len || len > sc.max_seqlen) return;
  const int q0 = static_cast<int>(tile.start);
  const int hl = blockIdx.y, h = h0 + hl;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int ty = tid >> 4, tx = tid & 15;  // query rows 4 ty .. 4 ty + 3, keys 4 tx .. 4 tx + 3 of a tile pair
  const int d = a.d;
  const Cols c = cols_of(a.heads, d, h);
  const int64_t D = int64_t{a.heads} * d;  // out / dout row width
  const Dropout dr = with_step_read(a.dr);
  float* row = part + (int64_t{blockIdx.x} * pass_heads + hl) * E;

  // lse and D_i = dout_i . out_i of the query tile, a warp per row (0 past the sequence).
  for (int r = warp; r < kTile; r += kPairWarps) {
    const int qi = q0 + r;
    float acc = 0.0f;
    if (qi < len) {
      const int64_t base = (int64_t{first} + qi) * D + c.q;
      for (int k = lane; k < d; k += 32) acc += load(a.dout, a.dout_e, base + k) * load(a.out, a.out_e, base + k);
    }
    acc = warp_sum(acc);
    if (lane == 0) {
      sm.D[r] = acc;
      sm.lse[r] = qi < len ? a.lse[(int64_t{first} + qi) * a.heads + h] : 0.0f;
    }
  }

  const int tiles = (len + kTile - 1) / kTile;
  for (int kt = 0; kt < tiles; ++kt) {
    const int k0 = kt * kTile;
    float s[4][4], dp[4][4];
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
      for (int y = 0; y < 4; ++y) s[x][y] = dp[x][y] = 0.0f;

    for (int c0 = 0; c0 < d; c0 += kChunk) {
      // The previous chunk's (or key tile's dS and diagonal) reads are done;
      // the first time: lse and D are written.
      __syncthreads();
      // A warp stages 8 rows x 4 columns per step (rows r, columns col of
      // the chunk); zeros past the sequence and past d (they add exact zeros).
      for (int w = warp; w < (kTile / 8) * (kChunk / 4); w += kPairWarps) {
        const int r = (w % (kTile / 8)) * 8 + (lane >> 2), col = (w / (kTile / 8)) * 4 + (lane & 3);
        const int kc = c0 + col, qi = q0 + r, kj = k0 + r;
        const bool q_in = kc < d && qi < len, k_in = kc < d && kj < len;
        const int64_t tq = int64_t{first} + qi, tk = int64_t{first} + kj;
        sm.u.t.q[col][r] = q_in ? load(a.qkv, a.e, tq * c.stride + c.q + kc) : 0.0f;
        sm.u.t.g[col][r] = q_in ? load(a.dout, a.dout_e, tq * D + c.q + kc) : 0.0f;
        sm.u.t.k[col][r] = k_in ? load(a.qkv, a.e, tk * c.stride + c.k + kc) : 0.0f;
        sm.u.t.v[col][r] = k_in ? load(a.qkv, a.e, tk * c.stride + c.v + kc) : 0.0f;
      }
      __syncthreads();
#pragma unroll 8
      for (int kk = 0; kk < kChunk; ++kk) {
        const float4 qa = *reinterpret_cast<const float4*>(&sm.u.t.q[kk][4 * ty]);
        const float4 ga = *reinterpret_cast<const float4*>(&sm.u.t.g[kk][4 * ty]);
        const float4 kb = *reinterpret_cast<const float4*>(&sm.u.t.k[kk][4 * tx]);
        const float4 vb = *reinterpret_cast<const float4*>(&sm.u.t.v[kk][4 * tx]);
        const float qv[4] = {qa.x, qa.y, qa.z, qa.w}, gv[4] = {ga.x, ga.y, ga.z, ga.w};
        const float kv[4] = {kb.x, kb.y, kb.z, kb.w}, vv[4] = {vb.x, vb.y, vb.z, vb.w};
#pragma unroll
        for (int x = 0; x < 4; ++x)
#pragma unroll
          for (int y = 0; y < 4; ++y) {
            s[x][y] = fmaf(qv[x], kv[y], s[x][y]);
            dp[x][y] = fmaf(gv[x], vv[y], dp[x][y]);
          }
      }
    }

    // dS of the thread's 4 x 4 block (0 for pairs past the sequence); one
    // Philox block per row draws its four keys' mask (k0 + 4 tx: a multiple of 4).
    float ds[4][4];
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int qi = q0 + 4 * ty + x, kj0 = k0 + 4 * tx;
      float m[4];
      mask_factors4(dr, int64_t{first} + qi, h, a.heads, kj0, m);
      const float l = sm.lse[4 * ty + x], Di = sm.D[4 * ty + x];
#pragma unroll
      for (int y = 0; y < 4; ++y) {
        const int kj = kj0 + y;
        float v = 0.0f;
        if (qi < len && kj < len) {
          const float p = expf(sc.score(s[x][y] * a.scale, qi, kj, h) - l);
          v = p * (dp[x][y] * m[y] - Di);
        }
        ds[x][y] = v;
      }
    }
    __syncthreads();  // every thread is done with the chunks: dS takes their place
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
      for (int y = 0; y < 4; ++y) sm.u.ds[4 * ty + x][4 * tx + y] = ds[x][y];
    __syncthreads();

    // Diagonal o = j - i by threads 2 (o + 63) and 2 (o + 63) + 1 (the
    // first and second half of its cells, each in order), joined by a shuffle.
    const bool diag_thread = tid < 2 * (2 * kTile - 1);
    const int o = (tid >> 1) - (kTile - 1), half = tid & 1;
    float sum = 0.0f;
    if (diag_thread) {
      const int n_len = relpos_drel::diagonal_length(o), mid = (n_len + 1) / 2;
      const int n_end = half ? n_len : mid;
      for (int n = half ? mid : 0; n < n_end; ++n) {
        const relpos_drel::Cell cell = relpos_drel::diagonal_cell(o, n);
        sum += sm.u.ds[cell.i][cell.j];
      }
    }
    const float other = __shfl_xor_sync(0xffffffffu, sum, 1);  // every lane: 2 threads per diagonal share a warp
    if (diag_thread && half == 0) {
      const float diag = sum + other;
      if (relpos_drel::is_final(kt, tiles, o)) {
        const float carried =
            relpos_drel::takes_carry(kt, o) ? sm.carry[(kt - 1) & 1][relpos_drel::carry_index(o)] : 0.0f;
        row[relpos_drel::diagonal_entry(k0, o)] = diag + carried;
      } else {
        sm.carry[kt & 1][relpos_drel::carry_index(o)] = diag;  // read after the next key tile's barriers
      }
    }
  }
}

// Pass 2: drel[r, h0 + hl] for r = blockIdx.x * 128 + threadIdx.x, the
// partials of every query tile of every sequence, in order.
__global__ void __launch_bounds__(kSumThreads)
    drel_sum_kernel(const float* part, const int32_t* cu, int B, int max_seqlen, int heads, int h0, int pass_heads,
                    int64_t E, float* drel) {
  const int r = static_cast<int>(blockIdx.x) * kSumThreads + static_cast<int>(threadIdx.x);
  if (r >= 2 * max_seqlen - 1) return;
  const int hl = blockIdx.y, delta = r - (max_seqlen - 1), distance = delta < 0 ? -delta : delta;
  float acc = 0.0f;
  for (int b = 0; b < B; ++b) {
    const int len = cu[b + 1] - cu[b];
    if (len <= distance || len > max_seqlen) continue;  // no pair that far apart (or a row pass 1 skipped)
    const int64_t slot0 = flash_tiles::first_slot(cu, b), entries = relpos_drel::entries_of(len);
    for (int q0 = 0; q0 < len; q0 += kTile) {
      const int64_t e = relpos_drel::entry_of_distance(delta, q0);
      if (e < 0 || e >= entries) continue;
      acc += part[((slot0 + q0 / kTile) * pass_heads + hl) * E + e];
    }
  }
  drel[int64_t{r} * heads + h0 + hl] = acc;
}

// The fallback: block (r, h) over T packed tokens; written (0 where no pair
// is that far apart).
__global__ void drel_walk_kernel(Backward a, RelposScores sc, float* drel, int64_t T) {
  __shared__ float scratch[32];
  const int r = blockIdx.x, h = blockIdx.y;
  const int delta = r - (sc.max_seqlen - 1);
  const int d = a.d;
  const Cols c = cols_of(a.heads, d, h);
  const int64_t D = int64_t{a.heads} * d;
  const float bias_r = sc.rel[int64_t{r} * a.heads + h];
  float acc = 0.0f;
  for (int64_t t = threadIdx.x; t < T; t += blockDim.x) {
    if (t >= a.cu[a.B]) break;  // rows past the last sequence (none with a packed batch)
    const int b = sequence_of(a.cu, a.B, t);
    const int first = a.cu[b], len = a.cu[b + 1] - first;
    const int i = static_cast<int>(t - first), j = i + delta;
    if (j < 0 || j >= len) continue;
    const int64_t tj = first + j;
    float s = 0.0f, dp = 0.0f, Di = 0.0f;
    for (int k = 0; k < d; ++k) {
      const float g = load(a.dout, a.dout_e, t * D + c.q + k);
      s += load(a.qkv, a.e, t * c.stride + c.q + k) * load(a.qkv, a.e, tj * c.stride + c.k + k);
      dp += g * load(a.qkv, a.e, tj * c.stride + c.v + k);
      Di += g * load(a.out, a.out_e, t * D + c.q + k);
    }
    const float p = expf(s * a.scale + bias_r - a.lse[t * a.heads + h]);
    acc += p * (dp * mask_factor(a.dr, t, h, a.heads, j) - Di);
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) drel[int64_t{r} * a.heads + h] = acc;
}

// drel[2 * max_seqlen - 1, heads] f32 WRITTEN (0 where no pair of tokens is
// that far apart): sum over sequences and queries i of dS_ij at j - i = r -
// (max_seqlen - 1), dS recomputed in f32 from qkv, dout, out and lse as
// a's kernels do. Tiled through `scratch` (relpos_drel_tiles.h) when one
// head's partials fit it, else a walk over the tokens per (r, head).
// Deterministic either way (fixed order, no atomics). A packed batch (B >= 1,
// T > 0), sequences no longer than max_seqlen.
void launch_relpos_drel(cudaStream_t s, const Scratch& scratch, const Backward& a, const RelposScores& sc, float* drel,
                        int64_t T) {
  const int M = sc.max_seqlen;
  const unsigned distances = static_cast<unsigned>(2 * M - 1);
  const int64_t slots = flash_tiles::slot_count(T, a.B);
  const int per_pass = relpos_drel::heads_per_pass(slots, a.heads, M, scratch.data ? scratch.bytes : 0);
  if (per_pass == 0) {
    drel_walk_kernel<<<dim3(distances, static_cast<unsigned>(a.heads)), kThreads, 0, s>>>(a, sc, drel, T);
    check_launch("drel_walk_kernel");
    return;
  }
  const int64_t E = relpos_drel::row_entries(M);
  float* part = static_cast<float*>(scratch.data);
  // Passes of heads share the workspace in stream order: a pass's sums are
  // read before the next pass's partials are written.
  for (int h0 = 0; h0 < a.heads; h0 += per_pass) {
    const int n = std::min(per_pass, a.heads - h0);
    drel_partials_kernel<<<dim3(static_cast<unsigned>(slots), static_cast<unsigned>(n)), kPairThreads, 0, s>>>(
        a, sc, part, h0, n, E);
    check_launch("drel_partials_kernel");
    drel_sum_kernel<<<dim3((distances + kSumThreads - 1) / kSumThreads, static_cast<unsigned>(n)), kSumThreads, 0,
                      s>>>(part, a.cu, a.B, M, a.heads, h0, n, E, drel);
    check_launch("drel_sum_kernel");
  }
}

}  // namespace

// ---- the launchers

void launch_attention_relpos(cudaStream_t s, const TensorView& out, const TensorView& qkv,
                             const TensorView& cu_seqlens, int heads, int max_seqlen, const TensorView& rel) {
  const int64_t B = cu_seqlens.dim(0) - 1;
  if (B == 0 || max_seqlen == 0 || qkv.dim(0) == 0) return;
  if (heads > 65535 || B > INT32_MAX / 2 || qkv.dim(0) > INT32_MAX / 2)
    throw Error(Errc::unsupported, "cuda attention_relpos: at most 65535 heads and 2^30 tokens per call");
  const int d = static_cast<int>(qkv.dim(1) / (3 * int64_t{heads}));
  // The exact path for every dtype: the flash kernel has no bias term yet.
  launch_simt(s, out, qkv, cu_seqlens.as<const int32_t>(), nullptr, heads, d, max_seqlen, B, rel.as<const float>(), 0);
}

void launch_attention_relpos_train(cudaStream_t s, const TensorView& out, const TensorView& lse,
                                   const TensorView& qkv, const TensorView& cu_seqlens, int heads, int max_seqlen,
                                   const TensorView& rel, const Ops::AttentionDropout& dropout) {
  if (cu_seqlens.dim(0) <= 1 || qkv.dim(0) == 0 || max_seqlen == 0) return;
  if (flash_train_takes(qkv, out, heads)) {
    launch_flash_attention_train(s, out, lse, qkv, cu_seqlens, heads, 0, rel.as<const float>(), max_seqlen, dropout);
    return;
  }
  launch_forward(s, "attention_relpos_train", out, lse, qkv, cu_seqlens, heads, max_seqlen,
                 RelposScores{rel.as<const float>(), heads, max_seqlen}, dropout);
}

void launch_attention_relpos_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dqkv,
                                      const TensorView& drel, const TensorView& dout, const TensorView& qkv,
                                      const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens,
                                      int heads, int max_seqlen, const TensorView& rel,
                                      const Ops::AttentionDropout& dropout) {
  const int64_t T = qkv.dim(0);
  if (cu_seqlens.dim(0) <= 1 || T == 0 || max_seqlen == 0) {  // no pair of tokens: nothing flows back
    if (dqkv.bytes()) check_cuda(cudaMemsetAsync(dqkv.data, 0, dqkv.bytes(), s), "cudaMemsetAsync");
    if (drel.bytes()) check_cuda(cudaMemsetAsync(drel.data, 0, drel.bytes(), s), "cudaMemsetAsync");
    return;
  }
  const RelposScores sc{rel.as<const float>(), heads, max_seqlen};
  const bool flash = flash_train_takes(qkv, out, heads, {&dout, &dqkv});
  if (flash && 2 * int64_t{max_seqlen} - 1 > INT32_MAX)
    throw Error(Errc::unsupported, "cuda attention_relpos_backward: max_seqlen up to 2^30");
  const Backward a = flash ? backward_of(dqkv, dout, qkv, out, lse, cu_seqlens, heads, dropout)
                           : backward_args("attention_relpos_backward", dqkv, dout, qkv, out, lse, cu_seqlens, heads,
                                           max_seqlen, dropout);
  if (flash)
    launch_flash_attention_backward(s, dqkv, dout, qkv, out, lse, cu_seqlens, heads, 0, sc.rel, max_seqlen, dropout,
                                    scratch);  // done with the workspace before drel takes it (stream order)
  else
    launch_backward(s, a, T, max_seqlen, sc);
  launch_relpos_drel(s, scratch, a, sc, drel.as<float>(), T);
}

}  // namespace stoke::cuda
