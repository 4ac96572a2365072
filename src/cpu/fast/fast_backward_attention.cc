// attention_backward: one work item per (sequence, head), spread over the
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
// GCC warns that passing a vector by value would change the ABI between ISAs;
// none crosses a function boundary here (see fast_attention_tiles.h).
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/fast/fast_attention_tiles.h"
#include "cpu/fast/fast_ops.h"
#include "cpu/fast/fast_backward_common.h"
#include "cpu/fast/fast_math.h"
#include "cpu/fast/fast_philox.h"
#include "backend/op_checks_backward.h"

namespace stoke::cpu::fast {

namespace {

using namespace tiles;  // NOLINT: the attention kernels' toolkit (fast_attention_tiles.h)

struct Item {
  int64_t first, len, head;
};

struct Geometry {
  int64_t C, D, heads, d;  // qkv columns, out columns, heads, head dim
  float scale;
  int64_t window;  // sliding window (0: global)
};

// The attention-probability dropout of the forward being differentiated.
struct Dropout {
  MaskKey key;
  Ops::AttentionDropout spec;  // the mask's flat index: spec.row_index
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

}  // namespace

void attention_backward(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv, const TensorView& out,
                        const TensorView& lse, const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                        const Ops::AttentionDropout& dropout) {
  const AttentionShape shape =
      check_attention_backward(dqkv, dout, qkv, out, lse, cu_seqlens, heads, max_seqlen, window, dropout);
  if (shape.T == 0) return;
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  std::vector<Item> items;
  int64_t longest = 0;
  double work = 0.0;
  for (int64_t b = 0; b < shape.B; ++b) {
    const int64_t first = cu[b], len = cu[b + 1] - cu[b];
    if (len == 0) continue;
    longest = std::max(longest, len);
    work += 5.0 * static_cast<double>(len) * static_cast<double>(len) * static_cast<double>(shape.d * shape.heads);
    for (int64_t h = 0; h < shape.heads; ++h) items.push_back({first, len, h});
  }
  const Geometry g{3 * shape.heads * shape.d, shape.heads * shape.d, shape.heads, shape.d,
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
      Scratch scratch(longest, g.d, dropping);
      if (dropping) {
#pragma omp for schedule(dynamic)
        for (int64_t n = 0; n < n_items; ++n)
          backward_item<L, true>(x, o, go, l, dx, &drop, items[static_cast<size_t>(n)], g, scratch);
      } else {
#pragma omp for schedule(dynamic)
        for (int64_t n = 0; n < n_items; ++n)
          backward_item<L, false>(x, o, go, l, dx, nullptr, items[static_cast<size_t>(n)], g, scratch);
      }
    }
  });
  finish_output(dqkv, dx);
}

}  // namespace stoke::cpu::fast
