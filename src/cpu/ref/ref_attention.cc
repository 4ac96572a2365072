// Reference variable-length self-attention, forward and backward, one
// (sequence, head, query) at a time in double: every attention op of the list
// (attention, attention_train, attention_backward and MPNet's attention_relpos*)
// is one of the two functions below with or without a bias, dropout and lse.
// With s_ij = q_i·k_j / sqrt(d) (+ rel[j - i + M - 1, h] for MPNet, M =
// max_seqlen) and P_ij = exp(s_ij - lse_i):
//   dV_j = sum_i P_ij dout_i        dP_ij = dout_i · v_j
//   dS_ij = P_ij (dP_ij - D_i),     D_i = sum_j P_ij dP_ij = dout_i · out_i
//   dQ_i = sum_j dS_ij k_j / sqrt(d)   dK_j = sum_i dS_ij q_i / sqrt(d)
//   drel[j - i + M - 1, h] = sum over (sequence, i, j) of dS_ij
// (D_i from dout and out, as FlashAttention does: one dot product, not a row).
// With dropout on the probabilities, m_ij = mask_ij * f32(1 / (1 - p)) (0 where
// dropped; the mask drawn per element from Philox at flat index
// ((row_offset + t) * heads + h) * 2^32 + j, t the packed row of query i):
//   out_i = sum_j P_ij m_ij v_j     (lse_i stays the undropped log-denominator)
//   dV_j = sum_i P_ij m_ij dout_i   dP_ij = m_ij (dout_i · v_j)
// and dS, D, dQ, dK as above (D_i = dout_i · out_i = sum_j P_ij dP_ij still).
// Bidirectional; with a sliding window w > 0, query i sees only keys j with
// |i - j| <= w (P_ij = 0 elsewhere). The max is subtracted before exp.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/philox.h"
#include "backend/op_checks.h"
#include "backend/op_checks_backward.h"
#include "cpu/ref/ref_ops.h"
#include "backend/relpos_checks.h"

namespace stoke::cpu::ref {

namespace {

// m_ij of query row t, head h, keys [0, len) into m (all 1 when p = 0).
void mask_row(const Ops::AttentionDropout& dropout, int64_t t, int64_t h, int64_t heads, std::vector<double>& m) {
  if (dropout.p == 0.0f) {
    std::fill(m.begin(), m.end(), 1.0);
    return;
  }
  const float scale = dropout.p < 1.0f ? 1.0f / (1.0f - dropout.p) : 0.0f;  // the dropout op's f32 factor
  const uint32_t step = dropout.step.host_value();
  for (size_t j = 0; j < m.size(); ++j) {
    const uint64_t index = dropout.row_index(t, h, heads) + j;
    const bool keep = philox::element_uniform(dropout.seed, step, dropout.tensor_id, index) >= dropout.p;
    m[j] = keep ? static_cast<double>(scale) : 0.0;
  }
}

// qkv widened to double once, with its row width.
struct WideQkv {
  std::vector<double> x;
  int64_t C;
  WideQkv(const TensorView& qkv, int64_t T, int64_t C) : x(static_cast<size_t>(T * C)), C(C) {
    for (int64_t i = 0; i < T * C; ++i) x[static_cast<size_t>(i)] = load(qkv, i);
  }
  double operator()(int64_t row, int64_t col) const { return x[static_cast<size_t>(row * C + col)]; }
};

// The scaled score plus the relative-position bias when there is one.
double biased(double s, double scale, const TensorView& rel, int64_t i, int64_t j, int64_t h, int64_t nh,
              int64_t M) {
  const double v = s * scale;
  return rel.empty() ? v : v + load(rel, (j - i + M - 1) * nh + h);
}

// Whether query i sees key j under the sliding window (0: every key).
bool sees(int64_t i, int64_t j, int window) { return window == 0 || std::abs(i - j) <= window; }

// out (and lse when not empty); rel may be empty (no bias).
void forward(const TensorView& out, const TensorView& lse, const TensorView& qkv, const TensorView& cu,
             const AttentionShape& shape, int max_seqlen, int window, const TensorView& rel,
             const Ops::AttentionDropout& dropout) {
  const auto [T, B, nh, d] = shape;
  const int64_t M = max_seqlen;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const WideQkv X(qkv, T, 3 * nh * d);  // qkv row: [q heads | k heads | v heads]
  std::vector<double> p, m;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = index_at(cu, b), len = index_at(cu, b + 1) - first;
    p.assign(static_cast<size_t>(len), 0.0);
    m.assign(static_cast<size_t>(len), 1.0);
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t qc = h * d, kc = nh * d + h * d, vc = 2 * nh * d + h * d;
      for (int64_t i = 0; i < len; ++i) {
        mask_row(dropout, first + i, h, nh, m);
        double mx = -INFINITY;
        for (int64_t j = 0; j < len; ++j) {
          if (!sees(i, j, window)) {
            p[static_cast<size_t>(j)] = -INFINITY;  // exp: exactly 0
            continue;
          }
          double s = 0.0;
          for (int64_t c = 0; c < d; ++c) s += X(first + i, qc + c) * X(first + j, kc + c);
          const double v = biased(s, scale, rel, i, j, h, nh, M);
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

// dqkv (and drel when rel is not empty: written, not accumulated).
void backward(const TensorView& dqkv, const TensorView& drel, const TensorView& dout, const TensorView& qkv,
              const TensorView& out, const TensorView& lse, const TensorView& cu, const AttentionShape& shape,
              int max_seqlen, int window, const TensorView& rel, const Ops::AttentionDropout& dropout) {
  const auto [T, B, nh, d] = shape;
  const int64_t C = 3 * nh * d, D = nh * d, M = max_seqlen;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const WideQkv X(qkv, T, C);
  std::vector<double> g(static_cast<size_t>(T * C), 0.0);
  std::vector<double> gr(rel.empty() ? 0 : static_cast<size_t>((2 * M - 1) * nh), 0.0);
  auto G = [&](int64_t row, int64_t col) -> double& { return g[static_cast<size_t>(row * C + col)]; };
  std::vector<double> p, dp, m;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = index_at(cu, b), len = index_at(cu, b + 1) - first;
    p.assign(static_cast<size_t>(len), 0.0);
    dp.assign(static_cast<size_t>(len), 0.0);
    m.assign(static_cast<size_t>(len), 1.0);
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t qc = h * d, kc = nh * d + h * d, vc = 2 * nh * d + h * d;
      for (int64_t i = 0; i < len; ++i) {
        const int64_t ti = first + i;
        const double l = load(lse, ti * nh + h);
        mask_row(dropout, ti, h, nh, m);
        double Di = 0.0;
        for (int64_t c = 0; c < d; ++c) Di += load(dout, ti * D + h * d + c) * load(out, ti * D + h * d + c);
        for (int64_t j = 0; j < len; ++j) {
          double s = 0.0, dpj = 0.0;
          for (int64_t c = 0; c < d; ++c) {
            s += X(ti, qc + c) * X(first + j, kc + c);
            dpj += load(dout, ti * D + h * d + c) * X(first + j, vc + c);
          }
          p[static_cast<size_t>(j)] = sees(i, j, window) ? std::exp(biased(s, scale, rel, i, j, h, nh, M) - l) : 0.0;
          dp[static_cast<size_t>(j)] = dpj * m[static_cast<size_t>(j)];
        }
        for (int64_t j = 0; j < len; ++j) {
          const double pj = p[static_cast<size_t>(j)], pdj = pj * m[static_cast<size_t>(j)];
          const double ds = pj * (dp[static_cast<size_t>(j)] - Di);
          if (!gr.empty()) gr[static_cast<size_t>((j - i + M - 1) * nh + h)] += ds;
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

}  // namespace

void attention(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads, int max_seqlen,
               int window) {
  const AttentionShape shape = check_attention(out, qkv, cu_seqlens, heads, max_seqlen, window);
  forward(out, TensorView{}, qkv, cu_seqlens, shape, max_seqlen, window, TensorView{}, Ops::AttentionDropout{});
}

void attention_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                     const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                     const Ops::AttentionDropout& dropout) {
  const AttentionShape shape = check_attention_train(out, lse, qkv, cu_seqlens, heads, max_seqlen, window, dropout);
  forward(out, lse, qkv, cu_seqlens, shape, max_seqlen, window, TensorView{}, dropout);
}

void attention_backward(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv, const TensorView& out,
                        const TensorView& lse, const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                        const Ops::AttentionDropout& dropout) {
  const AttentionShape shape =
      check_attention_backward(dqkv, dout, qkv, out, lse, cu_seqlens, heads, max_seqlen, window, dropout);
  backward(dqkv, TensorView{}, dout, qkv, out, lse, cu_seqlens, shape, max_seqlen, window, TensorView{}, dropout);
}

void attention_relpos(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                      int max_seqlen, const TensorView& rel) {
  const AttentionShape shape = check_attention_relpos(out, qkv, cu_seqlens, heads, max_seqlen, rel);
  forward(out, TensorView{}, qkv, cu_seqlens, shape, max_seqlen, 0, rel, Ops::AttentionDropout{});
}

void attention_relpos_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                            const TensorView& cu_seqlens, int heads, int max_seqlen, const TensorView& rel,
                            const Ops::AttentionDropout& dropout) {
  const AttentionShape shape =
      check_attention_relpos_train(out, lse, qkv, cu_seqlens, heads, max_seqlen, rel, dropout);
  forward(out, lse, qkv, cu_seqlens, shape, max_seqlen, 0, rel, dropout);
}

void attention_relpos_backward(const TensorView& dqkv, const TensorView& drel, const TensorView& dout,
                               const TensorView& qkv, const TensorView& out, const TensorView& lse,
                               const TensorView& cu_seqlens, int heads, int max_seqlen, const TensorView& rel,
                               const Ops::AttentionDropout& dropout) {
  const AttentionShape shape = check_attention_relpos_backward(dqkv, drel, dout, qkv, out, lse, cu_seqlens, heads,
                                                               max_seqlen, rel, dropout);
  backward(dqkv, drel, dout, qkv, out, lse, cu_seqlens, shape, max_seqlen, 0, rel, dropout);
}

}  // namespace stoke::cpu::ref
