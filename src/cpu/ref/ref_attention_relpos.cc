// Reference attention with a relative-position bias (MPNet), one (sequence,
// head, query) at a time in double: the algorithms of ref_attention.cc and
// ref_backward_attention.cc with s_ij = q_i·k_j / sqrt(d) + rel[j - i + M - 1, h]
// (M = max_seqlen), and the bias's gradient drel[j - i + M - 1, h] = sum of dS_ij.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/philox.h"
#include "cpu/ref/ref_ops.h"
#include "cpu/ref/relpos_checks.h"

namespace stoke::cpu::ref {

namespace {

// m_ij of query row t, head h (all 1 when p = 0): the attention dropout mask.
void mask_row(const Ops::AttentionDropout& dropout, int64_t t, int64_t h, int64_t heads, int64_t max_seqlen,
              std::vector<double>& m) {
  if (dropout.p == 0.0f) {
    std::fill(m.begin(), m.end(), 1.0);
    return;
  }
  const float scale = dropout.p < 1.0f ? 1.0f / (1.0f - dropout.p) : 0.0f;
  for (size_t j = 0; j < m.size(); ++j) {
    const uint64_t index = static_cast<uint64_t>((t * heads + h) * max_seqlen) + j;
    const bool keep = philox::element_uniform(dropout.seed, dropout.step, dropout.tensor_id, index) >= dropout.p;
    m[j] = keep ? static_cast<double>(scale) : 0.0;
  }
}

// out (and lse when not empty): the forward, with dropout mask m on P.
void forward(const TensorView& out, const TensorView& lse, const TensorView& qkv, const TensorView& cu, int64_t T,
             int64_t B, int64_t nh, int64_t d, int max_seqlen, const TensorView& rel,
             const Ops::AttentionDropout& dropout) {
  const int64_t C = 3 * nh * d, M = max_seqlen;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> x(static_cast<size_t>(T * C));
  for (int64_t i = 0; i < T * C; ++i) x[static_cast<size_t>(i)] = load(qkv, i);
  auto X = [&](int64_t row, int64_t col) { return x[static_cast<size_t>(row * C + col)]; };
  std::vector<double> p, m;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = index_at(cu, b), len = index_at(cu, b + 1) - first;
    p.assign(static_cast<size_t>(len), 0.0);
    m.assign(static_cast<size_t>(len), 1.0);
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t qc = h * d, kc = nh * d + h * d, vc = 2 * nh * d + h * d;
      for (int64_t i = 0; i < len; ++i) {
        mask_row(dropout, first + i, h, nh, M, m);
        double mx = -INFINITY;
        for (int64_t j = 0; j < len; ++j) {
          double s = 0.0;
          for (int64_t c = 0; c < d; ++c) s += X(first + i, qc + c) * X(first + j, kc + c);
          const double v = s * scale + load(rel, (j - i + M - 1) * nh + h);
          p[static_cast<size_t>(j)] = v;
          mx = std::max(mx, v);
        }
        double sum = 0.0;
        for (int64_t j = 0; j < len; ++j) {
          p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx);
          sum += p[static_cast<size_t>(j)];
        }
        for (int64_t c = 0; c < d; ++c) {
          double o = 0.0;
          for (int64_t j = 0; j < len; ++j)
            o += p[static_cast<size_t>(j)] * m[static_cast<size_t>(j)] * X(first + j, vc + c);
          store(out, (first + i) * nh * d + h * d + c, o / sum);
        }
        if (!lse.empty()) store(lse, (first + i) * nh + h, mx + std::log(sum));
      }
    }
  }
}

}  // namespace

void attention_relpos(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                      int max_seqlen, const TensorView& rel) {
  const auto [T, B, nh, d] = check_attention(out, qkv, cu_seqlens, heads, max_seqlen);
  check_relpos_table("attention_relpos", rel, heads, max_seqlen);
  forward(out, TensorView{}, qkv, cu_seqlens, T, B, nh, d, max_seqlen, rel, Ops::AttentionDropout{});
}

void attention_relpos_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                            const TensorView& cu_seqlens, int heads, int max_seqlen, const TensorView& rel,
                            const Ops::AttentionDropout& dropout) {
  const auto [T, B, nh, d] = check_attention_train(out, lse, qkv, cu_seqlens, heads, max_seqlen, dropout);
  check_relpos_table("attention_relpos_train", rel, heads, max_seqlen);
  forward(out, lse, qkv, cu_seqlens, T, B, nh, d, max_seqlen, rel, dropout);
}

void attention_relpos_backward(const TensorView& dqkv, const TensorView& drel, const TensorView& dout,
                               const TensorView& qkv, const TensorView& out, const TensorView& lse,
                               const TensorView& cu_seqlens, int heads, int max_seqlen, const TensorView& rel,
                               const Ops::AttentionDropout& dropout) {
  const auto [T, B, nh, d] =
      check_attention_backward(dqkv, dout, qkv, out, lse, cu_seqlens, heads, max_seqlen, dropout);
  check_relpos_table("attention_relpos_backward", rel, heads, max_seqlen);
  check_relpos_table("attention_relpos_backward", drel, heads, max_seqlen);
  const int64_t C = 3 * nh * d, D = nh * d, M = max_seqlen;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> x(static_cast<size_t>(T * C)), g(static_cast<size_t>(T * C), 0.0);
  std::vector<double> gr(static_cast<size_t>((2 * M - 1) * nh), 0.0);
  for (int64_t i = 0; i < T * C; ++i) x[static_cast<size_t>(i)] = load(qkv, i);
  auto X = [&](int64_t row, int64_t col) { return x[static_cast<size_t>(row * C + col)]; };
  auto G = [&](int64_t row, int64_t col) -> double& { return g[static_cast<size_t>(row * C + col)]; };
  std::vector<double> p, dp, m;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = index_at(cu_seqlens, b), len = index_at(cu_seqlens, b + 1) - first;
    p.assign(static_cast<size_t>(len), 0.0);
    dp.assign(static_cast<size_t>(len), 0.0);
    m.assign(static_cast<size_t>(len), 1.0);
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t qc = h * d, kc = nh * d + h * d, vc = 2 * nh * d + h * d;
      for (int64_t i = 0; i < len; ++i) {
        const int64_t ti = first + i;
        const double l = load(lse, ti * nh + h);
        mask_row(dropout, ti, h, nh, M, m);
        double Di = 0.0;
        for (int64_t c = 0; c < d; ++c) Di += load(dout, ti * D + h * d + c) * load(out, ti * D + h * d + c);
        for (int64_t j = 0; j < len; ++j) {
          double s = 0.0, dpj = 0.0;
          for (int64_t c = 0; c < d; ++c) {
            s += X(ti, qc + c) * X(first + j, kc + c);
            dpj += load(dout, ti * D + h * d + c) * X(first + j, vc + c);
          }
          p[static_cast<size_t>(j)] = std::exp(s * scale + load(rel, (j - i + M - 1) * nh + h) - l);
          dp[static_cast<size_t>(j)] = dpj * m[static_cast<size_t>(j)];
        }
        for (int64_t j = 0; j < len; ++j) {
          const double pj = p[static_cast<size_t>(j)], pdj = pj * m[static_cast<size_t>(j)];
          const double ds = pj * (dp[static_cast<size_t>(j)] - Di);
          gr[static_cast<size_t>((j - i + M - 1) * nh + h)] += ds;
          for (int64_t c = 0; c < d; ++c) {
            G(ti, qc + c) += ds * X(first + j, kc + c) * scale;
            G(first + j, kc + c) += ds * X(ti, qc + c) * scale;
            G(first + j, vc + c) += pdj * load(dout, ti * D + h * d + c);
          }
        }
      }
    }
  }
  for (int64_t i = 0; i < T * C; ++i) store(dqkv, i, g[static_cast<size_t>(i)]);
  for (size_t i = 0; i < gr.size(); ++i) store(drel, static_cast<int64_t>(i), gr[i]);
}

}  // namespace stoke::cpu::ref
