// Reference attention training forward (out and the log-sum-exp kept) and
// backward, one (sequence, head) at a time in double. With s_ij = q_i·k_j /
// sqrt(d) and P_ij = exp(s_ij - lse_i):
//   dV_j = sum_i P_ij dout_i        dP_ij = dout_i · v_j
//   dS_ij = P_ij (dP_ij - D_i),     D_i = sum_j P_ij dP_ij = dout_i · out_i
//   dQ_i = sum_j dS_ij k_j / sqrt(d)   dK_j = sum_i dS_ij q_i / sqrt(d)
// (D_i from dout and out, as FlashAttention does: one dot product, not a row).
// With dropout on the probabilities, m_ij = mask_ij * f32(1 / (1 - p)) (0 where
// dropped; the mask drawn per element from Philox at flat index
// (t * heads + h) * max_seqlen + j, t the packed row of query i):
//   out_i = sum_j P_ij m_ij v_j     (lse_i stays the undropped log-denominator)
//   dV_j = sum_i P_ij m_ij dout_i   dP_ij = m_ij (dout_i · v_j)
// and dS, D, dQ, dK as above (D_i = dout_i · out_i = sum_j P_ij dP_ij still).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/philox.h"
#include "cpu/ref/op_checks_backward.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu::ref {

namespace {

// m_ij of query row t, head h, keys [0, len) into m (all 1 when p = 0).
void mask_row(const Ops::AttentionDropout& dropout, int64_t t, int64_t h, int64_t heads, int64_t max_seqlen,
              std::vector<double>& m) {
  if (dropout.p == 0.0f) {
    std::fill(m.begin(), m.end(), 1.0);
    return;
  }
  const float scale = dropout.p < 1.0f ? 1.0f / (1.0f - dropout.p) : 0.0f;  // the dropout op's f32 factor
  for (size_t j = 0; j < m.size(); ++j) {
    const uint64_t index = static_cast<uint64_t>((t * heads + h) * max_seqlen) + j;
    const bool keep = philox::element_uniform(dropout.seed, dropout.step, dropout.tensor_id, index) >= dropout.p;
    m[j] = keep ? static_cast<double>(scale) : 0.0;
  }
}

}  // namespace

void attention_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                     const TensorView& cu_seqlens, int heads, int max_seqlen, const Ops::AttentionDropout& dropout) {
  const auto [T, B, nh, d] = check_attention_train(out, lse, qkv, cu_seqlens, heads, max_seqlen, dropout);
  const int64_t C = 3 * nh * d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> x(static_cast<size_t>(T * C));
  for (int64_t i = 0; i < T * C; ++i) x[static_cast<size_t>(i)] = load(qkv, i);
  auto X = [&](int64_t row, int64_t col) { return x[static_cast<size_t>(row * C + col)]; };
  std::vector<double> p, m;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = index_at(cu_seqlens, b), len = index_at(cu_seqlens, b + 1) - first;
    p.assign(static_cast<size_t>(len), 0.0);
    m.assign(static_cast<size_t>(len), 1.0);
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t qc = h * d, kc = nh * d + h * d, vc = 2 * nh * d + h * d;
      for (int64_t i = 0; i < len; ++i) {
        mask_row(dropout, first + i, h, nh, max_seqlen, m);
        double mx = -INFINITY;
        for (int64_t j = 0; j < len; ++j) {
          double s = 0.0;
          for (int64_t c = 0; c < d; ++c) s += X(first + i, qc + c) * X(first + j, kc + c);
          p[static_cast<size_t>(j)] = s * scale;
          mx = std::max(mx, s * scale);
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
        store(lse, (first + i) * nh + h, mx + std::log(sum));
      }
    }
  }
}

void attention_backward(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv, const TensorView& out,
                        const TensorView& lse, const TensorView& cu_seqlens, int heads, int max_seqlen,
                        const Ops::AttentionDropout& dropout) {
  const auto [T, B, nh, d] =
      check_attention_backward(dqkv, dout, qkv, out, lse, cu_seqlens, heads, max_seqlen, dropout);
  const int64_t C = 3 * nh * d, D = nh * d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> x(static_cast<size_t>(T * C)), g(static_cast<size_t>(T * C), 0.0);
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
        mask_row(dropout, ti, h, nh, max_seqlen, m);
        double Di = 0.0;
        for (int64_t c = 0; c < d; ++c) Di += load(dout, ti * D + h * d + c) * load(out, ti * D + h * d + c);
        for (int64_t j = 0; j < len; ++j) {
          double s = 0.0, dpj = 0.0;
          for (int64_t c = 0; c < d; ++c) {
            s += X(ti, qc + c) * X(first + j, kc + c);
            dpj += load(dout, ti * D + h * d + c) * X(first + j, vc + c);
          }
          p[static_cast<size_t>(j)] = std::exp(s * scale - l);
          dp[static_cast<size_t>(j)] = dpj * m[static_cast<size_t>(j)];
        }
        for (int64_t j = 0; j < len; ++j) {
          const double pj = p[static_cast<size_t>(j)], pdj = pj * m[static_cast<size_t>(j)];
          const double ds = pj * (dp[static_cast<size_t>(j)] - Di);
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
}

}  // namespace stoke::cpu::ref
