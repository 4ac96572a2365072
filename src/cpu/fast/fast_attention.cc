// Variable-length attention over packed qkv.
//
// Work items are (sequence, head, range of up to kQueryBlock queries), spread
// over the threads dynamically (lengths differ). An item widens its head's
// keys into K^T [d, Lp] (L x L blocks transposed in registers) and values
// into V [Lp, dp] (float, zero-padded to whole vectors) once, then walks its
// queries kRows at a time:
//   Q = the rows' q / sqrt(d)
//   S = Q K^T                 (register-blocked: 8 queries x 32 keys, x 8
//                              where L = 8; keys past the sequence's end
//                              masked to -inf)
//   P = exp(S - rowmax S)     (numerically stable; whole vectors; the row sums
//                              are kept)
//   O = P V / rowsum          (register-blocked like S, over value columns,
//                              summed in chunks of kKeyChunk keys)
// so S is only kRows x Lp floats and stays in L1. L, the floats per vector,
// is 16 where the CPU has AVX-512 and 8 elsewhere (two 16-wide tiles would
// not fit AVX2's 16 registers: measured 25x slower). On the MiniLM shapes
// (d = 32, ~56 keys) the transposes, the masked whole-vector softmax and the
// 32-wide tiles took the op from ~37 to ~70 GFLOP/s on 2 threads here. Only
// the sequence's own tokens are read: no padding tokens, no cross-sequence
// work, and a query's result depends on its own sequence alone (tested).
// attention_train is the same kernel, also storing each query row's
// log-sum-exp (max + log rowsum) for the backward (attention_backward, at
// the end of this file).
// With attention dropout (a separate instantiation, so inference carries no
// trace of it) each row of exp(S - max) is multiplied by its mask factors
// (0 or f32(1 / (1 - p)), drawn by Philox at flat index
// ((row_offset + t) * heads + h) * 2^32 + j,
// Ops::AttentionDropout) after its sum is taken, before P V: the
// denominator and lse stay the undropped ones.
// A sliding window w (local attention) narrows every product to the keys in
// reach: an item widens only keys [i0 - w, i1 + w) of its sequence, and a
// block of kRows queries multiplies only the key tiles its rows can see, the
// keys beyond a row's own |i - j| <= w set to -inf before the softmax. A
// local layer over an 8k-token text thus costs O(L w d), not O(L^2 d).
//
// attention_backward (after the forward; its work items and scratch in
// namespace backward): one work item per (sequence, head), spread over the
// threads dynamically (lengths differ); an item owns its sequence's rows of
// its head's q, k and v columns of dqkv, so items never write the same
// element and no reduction crosses threads (deterministic for any thread
// count). Within an item, with K^T, V^T [d, Lp] built once (in-register
// transposes, zero past the sequence) and K's rows [len, dp], it takes the
// queries kRows at a time (Q: the rows' q / sqrt d; dO: their dout rows):
//   S  = Q K^T   (keys past the end -inf),   DP = dO V^T
//   P  = exp(S - lse),                       DS = P (DP - rowsum(dO * out))
//   dQ = DS K / sqrt d,   dK^T += Q^T DS,    dV^T += dO^T P
// every product a register-blocked tile of the vector width the forward uses
// (fast_attention_tiles.h), so a query block reads and writes dK^T and dV^T
// once instead of once per query (the per-query rank-1 updates before were
// most of the op's time). P is recomputed from q, k and the saved lse (no
// [len, len] matrix is kept).
// With attention dropout (a separate instantiation) the row's mask factors
// m_j (0 or f32(1 / (1 - p)), the forward's, redrawn from Philox at flat index
// ((row_offset + t) * heads + h) * 2^32 + j,
// Ops::AttentionDropout) enter as
//                      Pd = P m,  DS = P (DP m - rowsum(dO * out)),  dV^T += dO^T Pd
// With a sliding window w, each row's scores outside |i - j| <= w are set to
// -inf before the softmax, so P and DS are exactly 0 there (the products
// still run over the whole sequence: the windowed inference forward is the
// one tuned for long texts; narrowing these to the window's tiles is the
// backward's speed step).
// GCC warns that passing a vector (below) by value would change the ABI
// between ISAs; no vector ever crosses a function boundary here (the helpers
// are inlined into each clone), so the warning is off for the whole file,
// headers included (exp_approx_lanes is checked at its declaration's place).
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu/fast/fast_attention_tiles.h"
#include "cpu/fast/fast_backward_common.h"
#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_math.h"
#include "cpu/fast/fast_ops.h"
#include "cpu/fast/fast_philox.h"
#include "cpu/fast/fast_softmax_rows.h"
#include "backend/colbert_checks.h"
#include "backend/op_checks_backward.h"

namespace stoke::cpu::fast {

namespace {

// Queries per work item: K/V are widened once per item, so long items amortise
// that; 256 splits only long sequences, to share them between threads.
constexpr int64_t kQueryBlock = 256;
// Keys per chunk of P V's sums (fast_attention_tiles.h, product_rows_chunked).
constexpr int64_t kKeyChunk = 128;

using namespace tiles;  // NOLINT: this file's own toolkit (fast_attention_tiles.h)

std::atomic<int> g_vector_floats_for_testing{0};  // 0: by the CPU

// Sequence rows [first, first + len), head, the item's queries [i0, i1);
// keys: the sequence's first `keys` tokens are its keys (len, but for
// attention_keys: PyLate's unattended query expansion).
struct Item {
  int64_t first, len, head, i0, i1, keys;
};

struct Geometry {
  int64_t C;      // qkv columns: 3 * heads * d
  int64_t heads;  // number of heads
  int64_t d;      // head dim
  float scale;    // 1 / sqrt(d)
  int64_t window; // sliding window (0: global)
};

// The attention-probability dropout of a training call.
struct Dropout {
  MaskKey key;
  Ops::AttentionDropout spec;  // the mask's flat index: spec.row_index
};

// The calling thread's scratch, sized for the longest sequence of the call
// (f, one row of mask factors, only with dropout).
struct Scratch {
  std::vector<float> kt, v, q, s, o, f;
  Scratch(int64_t longest, int64_t d, bool dropout) {
    const int64_t Lp = round_up(std::max<int64_t>(longest, 1), kPad), dp = round_up(d, kPad);
    kt.resize(static_cast<size_t>(d * Lp));
    v.resize(static_cast<size_t>(Lp * dp));
    q.resize(static_cast<size_t>(round_up(kQueryBlock, kRows) * d));
    s.resize(static_cast<size_t>(kRows * Lp));
    o.resize(static_cast<size_t>(kRows * dp));
    if (dropout) f.resize(static_cast<size_t>(Lp + 6));  // (mask_factors' whole blocks)
  }
};

// Brings row j's q, k and v chunks of this head towards the cache ahead of
// use: rows are C elements apart (several KB), too far for the hardware
// prefetchers, and waiting on them was a third of the op's time.
template <class T>
inline void prefetch_row(const T* row, const Item& it, const Geometry& g) {
  const size_t bytes = static_cast<size_t>(g.d) * sizeof(T);
  for (const T* p : {row + it.head * g.d, row + (g.heads + it.head) * g.d, row + (2 * g.heads + it.head) * g.d})
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(reinterpret_cast<const char*>(p) + off);
}

// L: floats per vector. lse (null for inference): the training forward's
// log-sum-exp [T, heads].
// kDropout: mask the probabilities with *drop (null otherwise).
template <int L, class T, bool kDropout>
STOKE_CPU_CLONES void attend(const T* qkv, T* out, float* lse, const Dropout* drop, const Item& it, const Geometry& g,
                             Scratch& w) {
  const int64_t d = g.d, C = g.C, win = g.window;
  // The keys any query of the item sees, [kb, ke) of the sequence; K, V and
  // the score columns below are indexed from kb.
  const int64_t kb = win ? std::max<int64_t>(0, it.i0 - win) : 0;
  const int64_t ke = win ? std::min(it.keys, it.i1 + win) : it.keys;
  const int64_t len = ke - kb;
  const int64_t Lp = round_up(len, kPad), dp = round_up(d, kPad);
  // One pass over those rows widens V [Lp, dp] and the item's queries Q [n, d]
  // (scaled), zero beyond the head dim so the blocked kernels may run over the
  // padding; it also brings the rows' keys into the cache for K^T [d, Lp],
  // built after it in transposed 16 x 16 blocks.
  constexpr int64_t kAhead = 4;  // rows prefetched ahead
  const T* rows = qkv + (it.first + kb) * C;
  float* kt = w.kt.data();
  float* v = w.v.data();
  float* qs = w.q.data();
  for (int64_t j = 0; j < std::min(kAhead, len); ++j) prefetch_row(rows + j * C, it, g);
  for (int64_t j = 0; j < len; ++j) {
    if (j + kAhead < len) prefetch_row(rows + (j + kAhead) * C, it, g);
    const T* vj = rows + j * C + (2 * g.heads + it.head) * d;
    for (int64_t c = 0; c < d; ++c) v[j * dp + c] = to_float(vj[c]);
    for (int64_t c = d; c < dp; ++c) v[j * dp + c] = 0.0f;
    if (kb + j >= it.i0 && kb + j < it.i1) {
      const T* qj = rows + j * C + it.head * d;
      float* q = qs + (kb + j - it.i0) * d;
      for (int64_t c = 0; c < d; ++c) q[c] = to_float(qj[c]) * g.scale;
    }
  }
  // Queries past the keys (attention_keys) are not in the pass above.
  for (int64_t i = std::max(it.i0, ke); i < it.i1; ++i) {
    const T* qi = qkv + (it.first + i) * C + it.head * d;
    float* q = qs + (i - it.i0) * d;
    for (int64_t c = 0; c < d; ++c) q[c] = to_float(qi[c]) * g.scale;
  }
  widen_transposed<L>(rows + (g.heads + it.head) * d, C, len, d, Lp, kt);
  const int64_t n_all = it.i1 - it.i0;
  std::fill(qs + n_all * d, qs + round_up(n_all, kRows) * d,
            0.0f);  // the last block's padding rows
  float* s = w.s.data();
  float* o = w.o.data();
  float sums[kRows], maxes[kRows];
  for (int64_t r0 = 0; r0 < n_all; r0 += kRows) {
    const int64_t n = std::min(kRows, n_all - r0);  // real rows of this block
    // The block's keys: [j0, j1) from kb (all of them without a window);
    // scores in columns from jt, the whole tile holding j0, Lb of them.
    const int64_t a = it.i0 + r0;  // the block's first query (in the sequence)
    const int64_t j0 = win ? std::max<int64_t>(0, a - win - kb) : 0;
    const int64_t j1 = win ? std::min(len, a + n + win - kb) : len;
    const int64_t jt = j0 / kPad * kPad, Lb = round_up(j1 - jt, kPad);
    product_rows<L>(qs + r0 * d, d, kt + jt, Lp, d, Lb, j1 - jt, s, Lb);  // S = Q K^T, keys from j1 on -inf
    if (win)
      for (int64_t r = 0; r < n; ++r) {  // each row's keys outside |i - j| <= w
        const int64_t i = a + r - kb - jt;  // the row's own key, in the block's columns
        float* x = s + r * Lb;
        std::fill(x, x + std::clamp<int64_t>(i - win, 0, Lb), -__builtin_inff());
        std::fill(x + std::clamp<int64_t>(i + win + 1, 0, Lb), x + Lb, -__builtin_inff());
      }
    softmax_rows<L>(s, n, Lb, sums, maxes);
    if constexpr (kDropout) {
      for (int64_t r = 0; r < n; ++r) {
        const int64_t t = it.first + it.i0 + r0 + r;
        const float* f = mask_factors(drop->key, drop->spec.row_index(t, it.head, g.heads) + static_cast<uint64_t>(kb + jt),
                                      j1 - jt, w.f.data());
        float* x = s + r * Lb;
#pragma omp simd
        for (int64_t j = 0; j < j1 - jt; ++j) x[j] *= f[j];
      }
    }
    product_rows_chunked<L>(s, Lb, v + jt * dp, dp, j1 - jt, dp, o, dp, kKeyChunk);  // O = P V (unnormalised)
    for (int64_t r = 0; r < n; ++r) {
      const float inv = 1.0f / sums[r];
      T* oi = out + (it.first + it.i0 + r0 + r) * g.heads * d + it.head * d;
      for (int64_t c = 0; c < d; ++c) oi[c] = narrow_one<T>(o[r * dp + c] * inv);
      if (lse) lse[(it.first + it.i0 + r0 + r) * g.heads + it.head] = maxes[r] + std::log(sums[r]);
    }
  }
}

// drop: null for no dropout (inference, or p = 0). key_lens: null, or the
// keys of each sequence (attention_keys).
void attention_with_lse(const AttentionShape& shape, const TensorView& out, const TensorView& qkv,
                        const TensorView& cu_seqlens, int window, float* lse, const Dropout* drop,
                        const int32_t* key_lens = nullptr) {
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  std::vector<Item> items;
  int64_t longest = 0;
  double work = 0.0;  // multiply-adds of the whole call
  for (int64_t b = 0; b < shape.B; ++b) {
    const int64_t first = cu[b], len = cu[b + 1] - cu[b];
    longest = std::max(longest, len);
    const int64_t seen = window ? std::min<int64_t>(len, 2 * int64_t{window} + 1) : len;  // keys per query
    work += 2.0 * static_cast<double>(len) * static_cast<double>(seen) * static_cast<double>(shape.d * shape.heads);
    for (int64_t h = 0; h < shape.heads; ++h)
      for (int64_t i0 = 0; i0 < len; i0 += kQueryBlock)
        items.push_back({first, len, h, i0, std::min(len, i0 + kQueryBlock), key_lens ? key_lens[b] : len});
  }
  if (items.empty()) return;
  const Geometry g{3 * shape.heads * shape.d, shape.heads, shape.d,
                   static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.d))), window};
  const int64_t n_items = static_cast<int64_t>(items.size());
  const bool parallel = n_items > 1 && work >= static_cast<double>(kParallelMinElements) * 16;
  auto run = [&](auto lanes, auto tag) {
    constexpr int L = decltype(lanes)::value;
    using T = decltype(tag);
    const T* src = qkv.as<const T>();
    T* dst = out.as<T>();
#pragma omp parallel if (parallel)
    {
      Scratch scratch(longest, g.d, drop != nullptr);
      if (drop) {
#pragma omp for schedule(dynamic)
        for (int64_t n = 0; n < n_items; ++n)
          attend<L, T, true>(src, dst, lse, drop, items[static_cast<size_t>(n)], g, scratch);
      } else {
#pragma omp for schedule(dynamic)
        for (int64_t n = 0; n < n_items; ++n)
          attend<L, T, false>(src, dst, lse, nullptr, items[static_cast<size_t>(n)], g, scratch);
      }
    }
  };
  with_act_type(qkv.dtype, [&](auto tag) { with_vector_floats([&](auto lanes) { run(lanes, tag); }); });
}

}  // namespace

void set_attention_vector_floats_for_testing(int floats) { g_vector_floats_for_testing.store(floats); }

int tiles::attention_vector_floats() {
  // (x86-64-v4's features one by one: clang's builtin does not know the level's name.)
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                             __builtin_cpu_supports("avx512vl");
  const int forced = g_vector_floats_for_testing.load(std::memory_order_relaxed);
  return forced ? forced : avx512 ? 16 : 8;
}

void attention(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads, int max_seqlen,
               int window) {
  attention_with_lse(check_attention(out, qkv, cu_seqlens, heads, max_seqlen, window), out, qkv, cu_seqlens, window,
                     nullptr, nullptr);
}

void attention_keys(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens,
                    const TensorView& key_lens, int heads, int max_seqlen, int window) {
  attention_with_lse(check_attention_keys(out, qkv, cu_seqlens, key_lens, heads, max_seqlen, window), out, qkv,
                     cu_seqlens, window, nullptr, nullptr, key_lens.as<const int32_t>());
}

// The training forward: the same kernel, also keeping lse = max + log(sum) of
// each softmax row (scores already scaled by 1/sqrt(d)), and masking the
// probabilities when p > 0 (p = 0 runs the very code of inference).
void attention_train(const TensorView& out, const TensorView& lse, const TensorView& qkv, const TensorView& cu_seqlens,
                     int heads, int max_seqlen, int window, const Ops::AttentionDropout& dropout) {
  const AttentionShape shape = check_attention_train(out, lse, qkv, cu_seqlens, heads, max_seqlen, window, dropout);
  const Dropout drop{mask_key(dropout.p, dropout.seed, dropout.step.host_value(), dropout.tensor_id), dropout};
  attention_with_lse(shape, out, qkv, cu_seqlens, window, lse.as<float>(), dropout.p > 0.0f ? &drop : nullptr);
}

// ---- attention_backward

namespace {
namespace backward {

struct Item {
  int64_t first, len, head;
};

struct Geometry {
  int64_t C, D, heads, d;  // qkv columns, out columns, heads, head dim
  float scale;
  int64_t window;  // sliding window (0: global)
};

// Sized for the longest sequence of the call; every matrix padded with zeros
// to whole vectors (keys to Lp, the head dim to dp).
struct Scratch {
  std::vector<float> kt, vt, kr, qs, go, s, ds, dkt, dvt, dq, f;
  Scratch(int64_t longest, int64_t d, bool dropout) {
    const int64_t Lp = round_up(std::max<int64_t>(longest, 1), kPad), dp = round_up(d, kPad);
    auto size = [](std::vector<float>& v, int64_t n) { v.assign(static_cast<size_t>(n), 0.0f); };
    size(kt, d * Lp);    // K^T [d, Lp]
    size(vt, d * Lp);    // V^T [d, Lp]
    size(kr, Lp * dp);   // K [len, dp]
    size(qs, Lp * dp);   // Q [round_up(len, kRows), dp]
    size(go, kRows * dp);
    size(s, kRows * Lp);   // S, then P (Pd with dropout)
    size(ds, kRows * Lp);  // DP, then DS
    size(dkt, dp * Lp);    // dK^T, dV^T [dp, Lp]
    size(dvt, dp * Lp);
    size(dq, kRows * dp);
    if (dropout) size(f, Lp + 6);  // (mask_factors' whole blocks)
  }
};

// dst[c][0:Lp] += sum over r < kRows of coef[r][c] * rows[r][0:Lp] for every
// c < dst_rows (a multiple of kRows); Lp a multiple of kPad. Each tile of dst
// is loaded and stored once per call, whatever kRows.
template <int L, int kW>
[[gnu::always_inline]] inline void accumulate_tile(float* dst, int64_t Lp, const float* coef, int64_t coef_stride,
                                                   const float* rows, int64_t c0, int64_t j0) {
  VecOf<L> acc[kRows][kW];
  for (int64_t cc = 0; cc < kRows; ++cc)
    for (int w = 0; w < kW; ++w) acc[cc][w] = load_vec<L>(dst + (c0 + cc) * Lp + j0 + w * L);
  for (int64_t r = 0; r < kRows; ++r) {
    VecOf<L> x[kW];
    for (int w = 0; w < kW; ++w) x[w] = load_vec<L>(rows + r * Lp + j0 + w * L);
#pragma GCC unroll 8
    for (int64_t cc = 0; cc < kRows; ++cc) {
      const float k = coef[r * coef_stride + c0 + cc];
      for (int w = 0; w < kW; ++w) acc[cc][w] += k * x[w];
    }
  }
  for (int64_t cc = 0; cc < kRows; ++cc)
    for (int w = 0; w < kW; ++w) store_vec<L>(dst + (c0 + cc) * Lp + j0 + w * L, acc[cc][w]);
}

template <int L>
STOKE_CPU_CLONES void accumulate_outer(float* dst, int64_t dst_rows, int64_t Lp, const float* coef,
                                       int64_t coef_stride, const float* rows) {
  constexpr int kW = Lanes<L>::kW;
  for (int64_t c0 = 0; c0 < dst_rows; c0 += kRows) {
    int64_t j0 = 0;
    for (; j0 + kW * L <= Lp; j0 += kW * L) accumulate_tile<L, kW>(dst, Lp, coef, coef_stride, rows, c0, j0);
    for (; j0 < Lp; j0 += L) accumulate_tile<L, 1>(dst, Lp, coef, coef_stride, rows, c0, j0);
  }
}

// One query row: s (scores, -inf past len) becomes P (Pd with dropout: what
// dV takes), dp becomes DS; both zero from len on. l: the row's lse; D: its
// dout . out. kDropout: first draws the row's mask factors, flat indices
// [first, first + len), into fbuf.
template <bool kDropout>
STOKE_CPU_CLONES void row_softmax_grad(int64_t len, int64_t Lp, float l, float D, const MaskKey* key, uint64_t first,
                                       float* fbuf, float* s, float* dp) {
  const float* f = kDropout ? mask_factors(*key, first, len, fbuf) : nullptr;
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) {
    const float z = s[j] - l;                           // <= 0 up to rounding
    const float p = z < -69.0f ? 0.0f : exp_approx(z);  // (as the forward: no subnormal products)
    if constexpr (kDropout) {
      s[j] = p * f[j];
      dp[j] = p * (dp[j] * f[j] - D);
    } else {
      s[j] = p;
      dp[j] = p * (dp[j] - D);
    }
  }
  std::fill(s + len, s + Lp, 0.0f);
  std::fill(dp + len, dp + Lp, 0.0f);
}

// dst[j][0:d] = src[0:d][j] for j < len (dst rows dst_stride apart; src
// [dp, Lp]), L x L blocks transposed in registers.
template <int L>
[[gnu::always_inline]] inline void store_transposed(const float* src, int64_t Lp, int64_t len, int64_t d, float* dst,
                                                    int64_t dst_stride) {
  for (int64_t j0 = 0; j0 < len; j0 += L)
    for (int64_t c0 = 0; c0 < d; c0 += L) {
      const int64_t nc = std::min<int64_t>(L, d - c0), nj = std::min<int64_t>(L, len - j0);
      VecOf<L> r[L];
      for (int64_t cc = 0; cc < L; ++cc) r[cc] = load_vec<L>(src + (c0 + cc) * Lp + j0);  // rows < dp: padded
      transpose<L>(r);
      for (int64_t jj = 0; jj < nj; ++jj) std::memcpy(dst + (j0 + jj) * dst_stride + c0, &r[jj], nc * sizeof(float));
    }
}

template <int L, bool kDropout>
STOKE_CPU_CLONES void backward_item(const float* qkv, const float* out, const float* dout, const float* lse,
                                    float* dqkv, const Dropout* drop, const Item& it, const Geometry& g, Scratch& w) {
  const int64_t len = it.len, d = g.d, C = g.C, D = g.D;
  const int64_t Lp = round_up(len, kPad), dp = round_up(d, kPad);
  const int64_t qc = it.head * d, kc = (g.heads + it.head) * d, vc = (2 * g.heads + it.head) * d;
  const float* rows = qkv + it.first * C;
  float *kt = w.kt.data(), *vt = w.vt.data(), *kr = w.kr.data(), *qs = w.qs.data(), *go = w.go.data();
  float *s = w.s.data(), *ds = w.ds.data(), *dkt = w.dkt.data(), *dvt = w.dvt.data(), *dq = w.dq.data();
  widen_transposed<L>(rows + kc, C, len, d, Lp, kt);
  widen_transposed<L>(rows + vc, C, len, d, Lp, vt);
  const int64_t rows_padded = round_up(len, kRows);
  for (int64_t j = 0; j < rows_padded; ++j) {
    float* k = kr + j * dp;
    float* q = qs + j * dp;
    std::fill(k, k + dp, 0.0f);
    std::fill(q, q + dp, 0.0f);
    if (j >= len) continue;
    const float* row = rows + j * C;
    for (int64_t c = 0; c < d; ++c) {
      k[c] = row[kc + c];
      q[c] = row[qc + c] * g.scale;  // the forward's scaled q
    }
  }
  std::fill(dkt, dkt + dp * Lp, 0.0f);
  std::fill(dvt, dvt + dp * Lp, 0.0f);
  for (int64_t r0 = 0; r0 < len; r0 += kRows) {
    const int64_t n = std::min(kRows, len - r0);  // real rows of this block
    float Ds[kRows];
    for (int64_t r = 0; r < kRows; ++r) {
      float* gr = go + r * dp;
      std::fill(gr, gr + dp, 0.0f);
      Ds[r] = 0.0f;
      if (r >= n) continue;
      const int64_t t = it.first + r0 + r;
      const float* gt = dout + t * D + it.head * d;
      const float* ot = out + t * D + it.head * d;
      for (int64_t c = 0; c < d; ++c) {
        gr[c] = gt[c];
        Ds[r] += gt[c] * ot[c];
      }
    }
    product_rows<L>(qs + r0 * dp, dp, kt, Lp, d, Lp, len, s, Lp);  // S
    if (g.window)
      for (int64_t r = 0; r < n; ++r) {  // keys outside the row's window: P = 0
        const int64_t i = r0 + r;
        float* x = s + r * Lp;
        std::fill(x, x + std::max<int64_t>(0, i - g.window), -__builtin_inff());
        std::fill(x + std::min(len, i + g.window + 1), x + len, -__builtin_inff());
      }
    product_rows<L>(go, dp, vt, Lp, d, Lp, Lp, ds, Lp);            // DP
    for (int64_t r = 0; r < kRows; ++r) {
      if (r >= n) {  // padding rows add nothing below
        std::fill(s + r * Lp, s + (r + 1) * Lp, 0.0f);
        std::fill(ds + r * Lp, ds + (r + 1) * Lp, 0.0f);
        continue;
      }
      const int64_t t = it.first + r0 + r;
      const uint64_t mask_first = kDropout ? drop->spec.row_index(t, it.head, g.heads) : 0;
      row_softmax_grad<kDropout>(len, Lp, lse[t * g.heads + it.head], Ds[r], kDropout ? &drop->key : nullptr,
                                 mask_first, w.f.data(), s + r * Lp, ds + r * Lp);
    }
    product_rows<L>(ds, Lp, kr, dp, len, dp, dp, dq, dp);  // dQ (unscaled)
    for (int64_t r = 0; r < n; ++r) {
      float* dst = dqkv + (it.first + r0 + r) * C + qc;
      for (int64_t c = 0; c < d; ++c) dst[c] = dq[r * dp + c] * g.scale;
    }
    accumulate_outer<L>(dkt, dp, Lp, qs + r0 * dp, dp, ds);  // dK^T += Q^T DS
    accumulate_outer<L>(dvt, dp, Lp, go, dp, s);             // dV^T += dO^T P
  }
  store_transposed<L>(dkt, Lp, len, d, dqkv + it.first * C + kc, C);
  store_transposed<L>(dvt, Lp, len, d, dqkv + it.first * C + vc, C);
}

}  // namespace backward
}  // namespace

void attention_backward(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv, const TensorView& out,
                        const TensorView& lse, const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                        const Ops::AttentionDropout& dropout) {
  const AttentionShape shape =
      check_attention_backward(dqkv, dout, qkv, out, lse, cu_seqlens, heads, max_seqlen, window, dropout);
  if (shape.T == 0) return;
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  std::vector<backward::Item> items;
  int64_t longest = 0;
  double work = 0.0;
  for (int64_t b = 0; b < shape.B; ++b) {
    const int64_t first = cu[b], len = cu[b + 1] - cu[b];
    if (len == 0) continue;
    longest = std::max(longest, len);
    work += 5.0 * static_cast<double>(len) * static_cast<double>(len) * static_cast<double>(shape.d * shape.heads);
    for (int64_t h = 0; h < shape.heads; ++h) items.push_back({first, len, h});
  }
  const backward::Geometry g{3 * shape.heads * shape.d, shape.heads * shape.d, shape.heads, shape.d,
                   static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.d))), window};
  thread_local std::vector<float> qkv_buf, out_buf, dout_buf, dqkv_buf;
  const float* x = f32_input(qkv, qkv_buf);
  const float* o = f32_input(out, out_buf);
  const float* go = f32_input(dout, dout_buf);
  float* dx = f32_output(dqkv, dqkv_buf);
  const float* l = lse.as<const float>();
  const int64_t n_items = static_cast<int64_t>(items.size());
  const bool parallel = n_items > 1 && work >= static_cast<double>(kParallelMinElements) * 16;
  const Dropout drop{mask_key(dropout.p, dropout.seed, dropout.step.host_value(), dropout.tensor_id), dropout};
  const bool dropping = dropout.p > 0.0f;  // p = 0: the code without dropout, bit for bit
  with_vector_floats([&](auto lanes) {
    constexpr int L = decltype(lanes)::value;
#pragma omp parallel if (parallel)
    {
      backward::Scratch scratch(longest, g.d, dropping);
      if (dropping) {
#pragma omp for schedule(dynamic)
        for (int64_t n = 0; n < n_items; ++n)
          backward::backward_item<L, true>(x, o, go, l, dx, &drop, items[static_cast<size_t>(n)], g, scratch);
      } else {
#pragma omp for schedule(dynamic)
        for (int64_t n = 0; n < n_items; ++n)
          backward::backward_item<L, false>(x, o, go, l, dx, nullptr, items[static_cast<size_t>(n)], g, scratch);
      }
    }
  });
  finish_output(dqkv, dx);
}

}  // namespace stoke::cpu::fast
