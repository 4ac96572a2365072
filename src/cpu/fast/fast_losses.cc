// cross_entropy and mse_loss: forward and backward in one pass over the rows,
// metrics accumulated into the device buffer without a host read.
//
// Cross-entropy per row, with m = max_c z_c at c* (the first maximum):
//   s' = sum_{c != c*} e^(z_c - m)          (the max's own term, exactly 1, apart)
//   loss = log1p(s') - (1 - eps)(z_y - m) - eps (mean_c z_c - m)
//   dz_c = scale * (e^(z_c - m) / (1 + s') - (1 - eps)[c == y] - eps / C),
//          at c*: scale * ((1 - target) - s' / (1 + s'))
// Keeping the max's 1 out of the f32 sum is what keeps a confident row's small
// loss accurate: log(1 + s') of a rounded 1 + s' would lose s' to rounding.
// Threads over rows for big calls; the per-row losses are then summed in row
// order, so the metrics do not depend on the thread count.
#include <cmath>
#include <vector>

#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_math.h"
#include "cpu/fast/fast_ops.h"
#include "backend/train_checks.h"

namespace stoke::cpu::fast {

namespace {

struct RowResult {
  double loss;
  bool correct;
};

STOKE_CPU_CLONES RowResult cross_entropy_row(const float* z, float* d, int64_t C, int32_t y, float eps, float scale) {
  float mx = z[0];
  for (int64_t c = 1; c < C; ++c) mx = z[c] > mx ? z[c] : mx;
  int64_t best = 0;
  while (best < C - 1 && !(z[best] == mx)) ++best;  // the first maximum, as torch.argmax
  float rest = 0.0f;
  double sum_z = 0.0;
#pragma omp simd reduction(+ : rest, sum_z)
  for (int64_t c = 0; c < C; ++c) {
    rest += c == best ? 0.0f : exp_approx(z[c] - mx);
    sum_z += z[c];
  }
  const double mean_shifted = sum_z / static_cast<double>(C) - mx;
  const double zy_shifted = static_cast<double>(z[y]) - mx;
  const double loss = std::log1p(static_cast<double>(rest)) - (1.0 - static_cast<double>(eps)) * zy_shifted -
                      static_cast<double>(eps) * mean_shifted;
  if (d) {
    // d may be z: each element is read before it is written, the row
    // statistics above are already taken.
    const float inv = 1.0f / (1.0f + rest);
    const float smooth = eps / static_cast<float>(C), hit = 1.0f - eps;
    for (int64_t c = 0; c < C; ++c) {
      const float target = (c == y ? hit : 0.0f) + smooth;
      // At the max, p = 1 / (1 + s') = 1 - s' / (1 + s'): written so, p - 1
      // keeps its tiny value on a confident row instead of rounding to 0.
      d[c] = scale * (c == best ? (1.0f - target) - rest * inv : exp_approx(z[c] - mx) * inv - target);
    }
  }
  return {loss, best == y};
}

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
  const int64_t B = s.B, C = s.C;
  std::vector<RowResult> rows(static_cast<size_t>(B));
  const float* z = logits.as<const float>();
  float* d = dlogits.empty() ? nullptr : dlogits.as<float>();
  const int32_t* y = labels.as<const int32_t>();
#pragma omp parallel for schedule(static) if (B * C >= kParallelMinElements && B > 1)
  for (int64_t b = 0; b < B; ++b)
    rows[static_cast<size_t>(b)] = cross_entropy_row(z + b * C, d ? d + b * C : nullptr, C, y[b], label_smoothing, scale);
  double loss_sum = 0.0, correct = 0.0;
  for (const RowResult& r : rows) {
    loss_sum += r.loss;
    correct += r.correct ? 1.0 : 0.0;
  }
  add_metrics(metrics, loss_sum, correct, static_cast<double>(B));
}

void mse_loss(const TensorView& dpred, const TensorView& metrics, const TensorView& pred, const TensorView& target,
              float scale) {
  const LossShape s = check_mse_loss(dpred, metrics, pred, target, scale);
  const float* x = pred.as<const float>();
  const float* t = target.as<const float>();
  float* d = dpred.empty() ? nullptr : dpred.as<float>();
  // One value per example: a plain loop is as fast as it gets.
  double loss_sum = 0.0;
  for (int64_t b = 0; b < s.B; ++b) {
    const float diff = x[b] - t[b];
    loss_sum += static_cast<double>(diff) * diff;
    if (d) d[b] = scale * 2.0f * diff;
  }
  add_metrics(metrics, loss_sum, 0.0, static_cast<double>(s.B));
}

}  // namespace stoke::cpu::fast
