// Reference cross-entropy and MSE, forward and backward in one call, with
// device metrics. Plain loops in double; every stored value is rounded once.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/ref/ref_ops.h"
#include "backend/train_checks.h"

namespace stoke::cpu::ref {

namespace {

void add_metrics(const TensorView& metrics, double loss_sum, double correct, double count) {
  if (metrics.empty()) return;
  double* m = metrics.as<double>();
  m[0] += loss_sum;
  m[1] += correct;
  m[2] += count;
}

}  // namespace

void cross_entropy(const TensorView& dlogits, const TensorView& metrics, const TensorView& logits,
                   const TensorView& labels, float label_smoothing, float scale) {
  const LossShape s = check_cross_entropy(dlogits, metrics, logits, labels, label_smoothing, scale);
  const double eps = label_smoothing;
  double loss_sum = 0.0, correct = 0.0;
  std::vector<double> z(static_cast<size_t>(s.C));
  for (int64_t b = 0; b < s.B; ++b) {
    // Read the whole row first: dlogits may be logits.
    int64_t best = 0;
    double sum_z = 0.0;
    for (int64_t c = 0; c < s.C; ++c) {
      z[static_cast<size_t>(c)] = logits.as<const float>()[b * s.C + c];
      if (z[static_cast<size_t>(c)] > z[static_cast<size_t>(best)]) best = c;  // first maximum, as torch.argmax
      sum_z += z[static_cast<size_t>(c)];
    }
    const double mx = z[static_cast<size_t>(best)];
    // The max's own term e^0 = 1 is kept out of the sum: lse - mx = log1p(rest)
    // stays accurate when the row is confident (rest tiny), where lse - z_y
    // would cancel to a few ulps of z_y.
    double rest = 0.0;
    for (int64_t c = 0; c < s.C; ++c)
      if (c != best) rest += std::exp(z[static_cast<size_t>(c)] - mx);
    const double lse_shifted = std::log1p(rest), lse = mx + lse_shifted;
    const int32_t y = index_at(labels, b);
    // (1 - eps) (lse - z_y) + eps * mean_c (lse - z_c), with every z shifted by mx
    loss_sum += lse_shifted - (1.0 - eps) * (z[static_cast<size_t>(y)] - mx) -
                eps * (sum_z / static_cast<double>(s.C) - mx);
    if (best == y) correct += 1.0;
    if (!dlogits.empty())
      for (int64_t c = 0; c < s.C; ++c) {
        const double target = (c == y ? 1.0 - eps : 0.0) + eps / static_cast<double>(s.C);
        // At the max p = 1 - rest / (1 + rest): p - 1 without cancellation.
        const double diff = c == best ? (1.0 - target) - rest / (1.0 + rest)
                                      : std::exp(z[static_cast<size_t>(c)] - lse) - target;
        dlogits.as<float>()[b * s.C + c] = static_cast<float>(static_cast<double>(scale) * diff);
      }
  }
  add_metrics(metrics, loss_sum, correct, static_cast<double>(s.B));
}

void mse_loss(const TensorView& dpred, const TensorView& metrics, const TensorView& pred, const TensorView& target,
              float scale) {
  const LossShape s = check_mse_loss(dpred, metrics, pred, target, scale);
  double loss_sum = 0.0;
  for (int64_t b = 0; b < s.B; ++b) {
    const double diff = static_cast<double>(pred.as<const float>()[b]) - target.as<const float>()[b];
    loss_sum += diff * diff;
    if (!dpred.empty()) dpred.as<float>()[b] = static_cast<float>(static_cast<double>(scale) * 2.0 * diff);
  }
  add_metrics(metrics, loss_sum, 0.0, static_cast<double>(s.B));
}

}  // namespace stoke::cpu::ref
