// Reference embedding_loss (contract: backend/op_list.h): plain loops, every
// value in double from the f32 inputs, each stored value rounded once. The
// workspace is checked, not used: the oracle keeps its own arrays.
//
// The backward, written out (no autodiff). With G(i, j) = dL/ds(i, j) over
// the similarities the loss reads, row i's gradient with respect to u_i is
//   g_i = sum_j G(i, j) u_j + sum_j G(j, i) u_j,
// and through u = x / n (n = ||x|| above 1e-12) the gradient of x is the part
// of g orthogonal to u, over n: dx = (g - u (u . g)) / n. Below the clamp n is
// the constant 1e-12 and dx = g / 1e-12 (torch's F.normalize: the max takes
// the gradient). Without normalize, u = x and dx = g.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/embedding_loss_checks.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu::ref {

namespace {

using Kind = Ops::EmbeddingLoss::Kind;
constexpr double kNormEps = 1e-12;

}  // namespace

void embedding_loss(const TensorView& d_emb, const TensorView& metrics, const TensorView& emb,
                    const TensorView& scores, const TensorView& workspace, const Ops::EmbeddingLoss& loss) {
  const EmbeddingLossShape s = check_embedding_loss(d_emb, metrics, emb, scores, workspace, loss);
  const int64_t B = s.B, R = s.R, D = s.D, d = s.d, M = s.M;
  const float* x = emb.as<const float>();

  // u_i: the first d columns of row i, normalized.
  std::vector<double> u(static_cast<size_t>(R * d)), norm(static_cast<size_t>(R), 1.0);
  for (int64_t i = 0; i < R; ++i) {
    double sq = 0.0;
    for (int64_t k = 0; k < d; ++k) sq += static_cast<double>(x[i * D + k]) * x[i * D + k];
    norm[static_cast<size_t>(i)] = std::sqrt(sq);
    const double n = loss.normalize ? std::max(norm[static_cast<size_t>(i)], kNormEps) : 1.0;
    for (int64_t k = 0; k < d; ++k) u[static_cast<size_t>(i * d + k)] = x[i * D + k] / n;
  }
  auto sim = [&](int64_t i, int64_t j) {
    double dot = 0.0;
    for (int64_t k = 0; k < d; ++k) dot += u[static_cast<size_t>(i * d + k)] * u[static_cast<size_t>(j * d + k)];
    return dot;
  };
  // dL/du, filled as the similarities' gradients are known.
  std::vector<double> gu(static_cast<size_t>(R * d), 0.0);
  auto add_pair_grad = [&](int64_t i, int64_t j, double g) {  // s(i, j) has gradient g
    for (int64_t k = 0; k < d; ++k) {
      gu[static_cast<size_t>(i * d + k)] += g * u[static_cast<size_t>(j * d + k)];
      gu[static_cast<size_t>(j * d + k)] += g * u[static_cast<size_t>(i * d + k)];
    }
  };

  double loss_sum = 0.0;  // L * B
  double hits = 0.0;
  const double scale = loss.scale;
  if (loss.kind == Kind::mnrl || loss.kind == Kind::mnrl_symmetric) {
    const bool sym = loss.kind == Kind::mnrl_symmetric;
    // z[b][j] = scale * s(a_b, candidate j), candidate j = row B + j.
    std::vector<double> z(static_cast<size_t>(B * M));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < M; ++j) z[static_cast<size_t>(b * M + j)] = scale * sim(b, B + j);
    auto lse_of = [](const std::vector<double>& v) {
      const double mx = *std::max_element(v.begin(), v.end());
      double sum = 0.0;
      for (double e : v) sum += std::exp(e - mx);
      return mx + std::log(sum);
    };
    // d2q row b = scale * s(positive b, anchor c) = z[c][b]: column b of the positive block.
    std::vector<double> col_lse(static_cast<size_t>(B), 0.0);
    if (sym)
      for (int64_t b = 0; b < B; ++b) {
        std::vector<double> col(static_cast<size_t>(B));
        for (int64_t c = 0; c < B; ++c) col[static_cast<size_t>(c)] = z[static_cast<size_t>(c * M + b)];
        col_lse[static_cast<size_t>(b)] = lse_of(col);
      }
    // Each direction's cross-entropy is a mean over B; the symmetric loss averages the two.
    const double coef = (sym ? 0.5 : 1.0) / static_cast<double>(B);
    for (int64_t b = 0; b < B; ++b) {
      const std::vector<double> row(z.begin() + b * M, z.begin() + (b + 1) * M);
      const double lse = lse_of(row), zbb = row[static_cast<size_t>(b)];
      loss_sum += sym ? 0.5 * (lse + col_lse[static_cast<size_t>(b)]) - zbb : lse - zbb;
      const auto best = std::max_element(row.begin(), row.end());  // the first maximum
      if (best - row.begin() == b) hits += 1.0;
      if (d_emb.empty()) continue;
      for (int64_t j = 0; j < M; ++j) {
        const double hit = j == b ? 1.0 : 0.0;
        double g = std::exp(row[static_cast<size_t>(j)] - lse) - hit;
        // d2q row j (a positive) holds z[b][j] as its anchor-b entry.
        if (sym && j < B) g += std::exp(row[static_cast<size_t>(j)] - col_lse[static_cast<size_t>(j)]) - hit;
        add_pair_grad(b, B + j, scale * coef * g);
      }
    }
  } else {
    const float* y = scores.as<const float>();
    std::vector<double> pair(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) pair[static_cast<size_t>(b)] = sim(b, B + b);
    std::vector<double> grad(static_cast<size_t>(B), 0.0);  // dL/ds(a_b, p_b)
    if (loss.kind == Kind::cosine_mse) {
      for (int64_t b = 0; b < B; ++b) {
        const double diff = pair[static_cast<size_t>(b)] - y[b];
        loss_sum += diff * diff;  // L = mean: L * B is the sum
        grad[static_cast<size_t>(b)] = 2.0 * diff / static_cast<double>(B);
      }
    } else {
      // CoSENT: L = log(e^0 + sum over (i, j), y_i < y_j, of e^(z_i - z_j)),
      // the 0 term inside the log-sum-exp, shifted by its largest term m >= 0.
      std::vector<double> zz(static_cast<size_t>(B));
      for (int64_t b = 0; b < B; ++b) zz[static_cast<size_t>(b)] = scale * pair[static_cast<size_t>(b)];
      double m = 0.0;
      for (int64_t i = 0; i < B; ++i)
        for (int64_t j = 0; j < B; ++j)
          if (y[i] < y[j]) m = std::max(m, zz[static_cast<size_t>(i)] - zz[static_cast<size_t>(j)]);
      double sum = std::exp(-m);
      for (int64_t i = 0; i < B; ++i)
        for (int64_t j = 0; j < B; ++j)
          if (y[i] < y[j]) sum += std::exp(zz[static_cast<size_t>(i)] - zz[static_cast<size_t>(j)] - m);
      const double L = m + std::log(sum);
      loss_sum = L * static_cast<double>(B);
      // dL/dz_i = sum_j w_ij - sum_j w_ji, w_ij = e^(z_i - z_j - L) over the pairs.
      for (int64_t i = 0; i < B; ++i)
        for (int64_t j = 0; j < B; ++j)
          if (y[i] < y[j]) {
            const double w = std::exp(zz[static_cast<size_t>(i)] - zz[static_cast<size_t>(j)] - L);
            grad[static_cast<size_t>(i)] += scale * w;
            grad[static_cast<size_t>(j)] -= scale * w;
          }
    }
    if (!d_emb.empty())
      for (int64_t b = 0; b < B; ++b) add_pair_grad(b, B + b, grad[static_cast<size_t>(b)]);
  }

  if (!d_emb.empty()) {
    const double factor = static_cast<double>(loss.grad_scale) * loss.weight;
    float* dx = d_emb.as<float>();
    for (int64_t i = 0; i < R; ++i) {
      const double* ui = &u[static_cast<size_t>(i * d)];
      const double* gi = &gu[static_cast<size_t>(i * d)];
      const double n = norm[static_cast<size_t>(i)];
      double along = 0.0;  // u . g, removed when the row was normalized by its own norm
      if (loss.normalize && n > kNormEps)
        for (int64_t k = 0; k < d; ++k) along += ui[k] * gi[k];
      const double over = !loss.normalize ? 1.0 : n > kNormEps ? 1.0 / n : 1.0 / kNormEps;
      for (int64_t k = 0; k < d; ++k) {
        const double g = (gi[k] - ui[k] * along) * over;
        dx[i * D + k] = static_cast<float>(static_cast<double>(dx[i * D + k]) + factor * g);
      }
    }
  }
  if (!metrics.empty()) {
    double* m = metrics.as<double>();
    m[0] += static_cast<double>(loss.weight) * loss_sum;
    if (loss.count) {
      m[1] += hits;
      m[2] += static_cast<double>(B);
    }
  }
}

}  // namespace stoke::cpu::ref
