// Variable-length attention over packed qkv.
//
// Work items are (sequence, head, range of up to kQueryBlock queries), spread
// over the threads dynamically (lengths differ). An item widens its head's
// keys into K^T [d, Lp] and values into V [Lp, dp] (float, zero-padded to
// whole vectors) once, then walks its queries kRows at a time:
//   Q = the rows' q / sqrt(d)
//   S = Q K^T                 (register-blocked: 8 queries x 16 keys)
//   P = exp(S - rowmax S)     (numerically stable; the row sums are kept)
//   O = P V / rowsum          (register-blocked: 8 queries x 16 value columns)
// so S is only kRows x Lp floats and stays in L1. Only the sequence's own
// tokens are read: no padding tokens, no cross-sequence work, and a query's
// result depends on its own sequence alone (tested).
// attention_train is the same kernel, also storing each query row's
// log-sum-exp (max + log rowsum) for the backward (fast_backward_attention.cc).
// With attention dropout (a separate instantiation, so inference carries no
// trace of it) each row of exp(S - max) is multiplied by its mask factors
// (0 or f32(1 / (1 - p)), drawn by Philox at flat index
// (t * heads + h) * max_seqlen + j) after its sum is taken, before P V: the
// denominator and lse stay the undropped ones.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/fast/fast_backward.h"
#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_math.h"
#include "cpu/fast/fast_ops.h"
#include "cpu/fast/fast_philox.h"
#include "cpu/ref/op_checks_backward.h"

namespace stoke::cpu::fast {

namespace {

// Queries per work item: K/V are widened once per item, so long items amortise
// that; 256 splits only long sequences, to share them between threads.
constexpr int64_t kQueryBlock = 256;
constexpr int64_t kRows = 8;  // 8 independent FMA chains: enough to hide FMA latency on 2 ports
constexpr int64_t kLanes = 16;

// The compiler's generic vector type (not an ISA intrinsic): each clone lowers
// it to one zmm, two ymm or four xmm operations. Left to itself the
// auto-vectoriser vectorised these loops across query rows instead, 10x slower.
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

// GCC warns that passing a Vec by value would change the ABI between ISAs;
// no Vec ever crosses a function boundary here (the helpers are inlined into
// each clone), so the warning is silenced for the kernels below.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
inline Vec load_vec(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof(Vec));
  return v;
}
inline void store_vec(float* p, Vec v) { std::memcpy(p, &v, sizeof(Vec)); }

inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

struct Item {
  int64_t first, len, head, i0, i1;  // sequence rows [first, first + len), its queries [i0, i1)
};

struct Geometry {
  int64_t C;      // qkv columns: 3 * heads * d
  int64_t heads;  // number of heads
  int64_t d;      // head dim
  float scale;    // 1 / sqrt(d)
};

// The attention-probability dropout of a training call.
struct Dropout {
  MaskKey key;
  int64_t max_seqlen;  // the row stride of the mask's flat index
};

// s[r][0:Lp] = q[r][0:d] . kt[0:d][0:Lp] for kRows rows; Lp a multiple of kLanes.
STOKE_CPU_CLONES void scores_block(const float* q, int64_t d, const float* kt, int64_t Lp, float* s) {
  for (int64_t j0 = 0; j0 < Lp; j0 += kLanes) {
    Vec acc[kRows] = {};
    for (int64_t c = 0; c < d; ++c) {
      const Vec k = load_vec(kt + c * Lp + j0);
#pragma GCC unroll 8
      for (int64_t r = 0; r < kRows; ++r) acc[r] += q[r * d + c] * k;
    }
#pragma GCC unroll 8
    for (int64_t r = 0; r < kRows; ++r) store_vec(s + r * Lp + j0, acc[r]);
  }
}

// o[r][0:dp] = p[r][0:len] . v[0:len][0:dp] for kRows rows; dp a multiple of kLanes.
STOKE_CPU_CLONES void values_block(const float* p, int64_t Lp, int64_t len, const float* v, int64_t dp, float* o) {
  for (int64_t c0 = 0; c0 < dp; c0 += kLanes) {
    Vec acc[kRows] = {};
    for (int64_t j = 0; j < len; ++j) {
      const Vec x = load_vec(v + j * dp + c0);
#pragma GCC unroll 8
      for (int64_t r = 0; r < kRows; ++r) acc[r] += p[r * Lp + j] * x;
    }
#pragma GCC unroll 8
    for (int64_t r = 0; r < kRows; ++r) store_vec(o + r * dp + c0, acc[r]);
  }
}

#pragma GCC diagnostic pop

// p = exp(s - max) over the first len entries of each of n rows of s (stride
// Lp), in place; sums[r] = sum of row r's p, maxes[r] = the max subtracted.
STOKE_CPU_CLONES void softmax_rows(float* s, int64_t n, int64_t Lp, int64_t len, float* sums, float* maxes) {
  for (int64_t r = 0; r < n; ++r) {
    float* x = s + r * Lp;
    float mx = x[0];
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < len; ++j) mx = x[j] > mx ? x[j] : mx;  // (std::max here stays scalar)
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < len; ++j) {
      // Below e^-69 ~ 1e-30 a weight cannot matter against the maximum's 1, and
      // its products with V could be subnormal (slow microcode assists, measured
      // 3x on the whole op): make it exactly 0.
      const float z = x[j] - mx;
      x[j] = z < -69.0f ? 0.0f : exp_approx(z);
      sum += x[j];
    }
    sums[r] = sum;
    maxes[r] = mx;
  }
}

// The calling thread's scratch, sized for the longest sequence of the call
// (f, one row of mask factors, only with dropout).
struct Scratch {
  std::vector<float> kt, v, q, s, o, f;
  Scratch(int64_t longest, int64_t d, bool dropout) {
    const int64_t Lp = round_up(std::max<int64_t>(longest, 1), kLanes), dp = round_up(d, kLanes);
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

// lse (null for inference): the training forward's log-sum-exp [T, heads].
// kDropout: mask the probabilities with *drop (null otherwise).
template <class T, bool kDropout>
STOKE_CPU_CLONES void attend(const T* qkv, T* out, float* lse, const Dropout* drop, const Item& it, const Geometry& g,
                             Scratch& w) {
  const int64_t len = it.len, d = g.d, C = g.C;
  const int64_t Lp = round_up(len, kLanes), dp = round_up(d, kLanes);
  // One pass over the sequence's rows widens K^T [d, Lp], V [Lp, dp] and the
  // item's queries Q [n, d] (scaled), zero beyond the sequence and the head
  // dim so the blocked kernels may run over the padding.
  constexpr int64_t kAhead = 4;  // rows prefetched ahead
  const T* rows = qkv + it.first * C;
  float* kt = w.kt.data();
  float* v = w.v.data();
  float* qs = w.q.data();
  for (int64_t c = 0; c < d; ++c) std::fill(kt + c * Lp + len, kt + (c + 1) * Lp, 0.0f);
  for (int64_t j = 0; j < std::min(kAhead, len); ++j) prefetch_row(rows + j * C, it, g);
  for (int64_t j = 0; j < len; ++j) {
    if (j + kAhead < len) prefetch_row(rows + (j + kAhead) * C, it, g);
    const T* kj = rows + j * C + (g.heads + it.head) * d;
    for (int64_t c = 0; c < d; ++c) kt[c * Lp + j] = to_float(kj[c]);
    const T* vj = rows + j * C + (2 * g.heads + it.head) * d;
    for (int64_t c = 0; c < d; ++c) v[j * dp + c] = to_float(vj[c]);
    for (int64_t c = d; c < dp; ++c) v[j * dp + c] = 0.0f;
    if (j >= it.i0 && j < it.i1) {
      const T* qj = rows + j * C + it.head * d;
      float* q = qs + (j - it.i0) * d;
      for (int64_t c = 0; c < d; ++c) q[c] = to_float(qj[c]) * g.scale;
    }
  }
  const int64_t n_all = it.i1 - it.i0;
  std::fill(qs + n_all * d, qs + round_up(n_all, kRows) * d, 0.0f);  // the last block's padding rows
  float* s = w.s.data();
  float* o = w.o.data();
  float sums[kRows], maxes[kRows];
  for (int64_t r0 = 0; r0 < n_all; r0 += kRows) {
    const int64_t n = std::min(kRows, n_all - r0);  // real rows of this block
    scores_block(qs + r0 * d, d, kt, Lp, s);
    softmax_rows(s, n, Lp, len, sums, maxes);
    if constexpr (kDropout) {
      for (int64_t r = 0; r < n; ++r) {
        const int64_t t = it.first + it.i0 + r0 + r;
        const float* f =
            mask_factors(drop->key, static_cast<uint64_t>((t * g.heads + it.head) * drop->max_seqlen), len, w.f.data());
        float* x = s + r * Lp;
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) x[j] *= f[j];
      }
    }
    values_block(s, Lp, len, v, dp, o);
    for (int64_t r = 0; r < n; ++r) {
      const float inv = 1.0f / sums[r];
      T* oi = out + (it.first + it.i0 + r0 + r) * g.heads * d + it.head * d;
      for (int64_t c = 0; c < d; ++c) oi[c] = narrow_one<T>(o[r * dp + c] * inv);
      if (lse) lse[(it.first + it.i0 + r0 + r) * g.heads + it.head] = maxes[r] + std::log(sums[r]);
    }
  }
}

// drop: null for no dropout (inference, or p = 0).
void attention_with_lse(const AttentionShape& shape, const TensorView& out, const TensorView& qkv,
                        const TensorView& cu_seqlens, float* lse, const Dropout* drop) {
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  std::vector<Item> items;
  int64_t longest = 0;
  double work = 0.0;  // multiply-adds of the whole call
  for (int64_t b = 0; b < shape.B; ++b) {
    const int64_t first = cu[b], len = cu[b + 1] - cu[b];
    longest = std::max(longest, len);
    work += 2.0 * static_cast<double>(len) * static_cast<double>(len) * static_cast<double>(shape.d * shape.heads);
    for (int64_t h = 0; h < shape.heads; ++h)
      for (int64_t i0 = 0; i0 < len; i0 += kQueryBlock)
        items.push_back({first, len, h, i0, std::min(len, i0 + kQueryBlock)});
  }
  if (items.empty()) return;
  const Geometry g{3 * shape.heads * shape.d, shape.heads, shape.d,
                   static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.d)))};
  const int64_t n_items = static_cast<int64_t>(items.size());
  const bool parallel = n_items > 1 && work >= static_cast<double>(kParallelMinElements) * 16;
  with_act_type(qkv.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* src = qkv.as<const T>();
    T* dst = out.as<T>();
#pragma omp parallel if (parallel)
    {
      Scratch scratch(longest, g.d, drop != nullptr);
      if (drop) {
#pragma omp for schedule(dynamic)
        for (int64_t n = 0; n < n_items; ++n)
          attend<T, true>(src, dst, lse, drop, items[static_cast<size_t>(n)], g, scratch);
      } else {
#pragma omp for schedule(dynamic)
        for (int64_t n = 0; n < n_items; ++n)
          attend<T, false>(src, dst, lse, nullptr, items[static_cast<size_t>(n)], g, scratch);
      }
    }
  });
}

}  // namespace

void attention(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads, int max_seqlen) {
  attention_with_lse(check_attention(out, qkv, cu_seqlens, heads, max_seqlen), out, qkv, cu_seqlens, nullptr,
                     nullptr);
}

// The training forward: the same kernel, also keeping lse = max + log(sum) of
// each softmax row (scores already scaled by 1/sqrt(d)), and masking the
// probabilities when p > 0 (p = 0 runs the very code of inference).
void attention_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                     const TensorView& cu_seqlens, int heads, int max_seqlen, const Ops::AttentionDropout& dropout) {
  const AttentionShape shape = check_attention_train(out, lse, qkv, cu_seqlens, heads, max_seqlen, dropout);
  const Dropout drop{mask_key(dropout.p, dropout.seed, dropout.step, dropout.tensor_id), max_seqlen};
  attention_with_lse(shape, out, qkv, cu_seqlens, lse.as<float>(), dropout.p > 0.0f ? &drop : nullptr);
}

}  // namespace stoke::cpu::fast
