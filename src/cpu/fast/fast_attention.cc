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
// log-sum-exp (max + log rowsum) for the backward (fast_backward_attention.cc).
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

}  // namespace stoke::cpu::fast
