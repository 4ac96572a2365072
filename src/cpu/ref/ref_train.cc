// Reference training ops: dropout from Philox, cross-entropy and MSE with
// device metrics, the gradient norm and clipping coefficient, AdamW. Plain
// loops in double; every stored value is rounded once.
#include "cpu/ref/ref_train.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/philox.h"
#include "cpu/ref/ref_ops.h"
#include "backend/train_checks.h"
#include "backend/loss_scale_rule.h"

namespace stoke::cpu::ref {

namespace {

// out = x * factor_i, factor_i = 1 / (1 - p) (as an f32) where element i is
// kept and 0 where it is dropped: x * 0 keeps torch's NaN * 0 = NaN. The f32
// product of x and the factor is exact in double (two 24-bit significands), so
// rounding it once to float gives the very bits of an f32 multiply.
void apply_mask(const char* op, const TensorView& out, const TensorView& x, float p, uint64_t seed,
                const Ops::DropoutStep& step_from, uint32_t tensor_id, uint64_t row_offset) {
  const DropoutRange r = check_dropout(op, out, x, p, step_from, row_offset);
  const uint32_t step = step_from.host_value();  // read now, when the op runs
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  for (int64_t i = 0; i < r.n; ++i) {
    const bool keep = philox::element_uniform(seed, step, tensor_id, r.first + static_cast<uint64_t>(i)) >= p;
    store(out, i, load(x, i) * static_cast<double>(keep ? scale : 0.0f));
  }
}

void add_metrics(const TensorView& metrics, double loss_sum, double correct, double count) {
  if (metrics.empty()) return;
  double* m = metrics.as<double>();
  m[0] += loss_sum;
  m[1] += correct;
  m[2] += count;
}

}  // namespace

void dropout(const TensorView& out, const TensorView& x, float p, uint64_t seed, const Ops::DropoutStep& step,
             uint32_t tensor_id, uint64_t row_offset) {
  apply_mask("dropout", out, x, p, seed, step, tensor_id, row_offset);
}

// The mask is a function of (seed, step, tensor_id, index) only, so the
// backward is the forward applied to dy.
void dropout_backward(const TensorView& dx, const TensorView& dy, float p, uint64_t seed,
                      const Ops::DropoutStep& step, uint32_t tensor_id, uint64_t row_offset) {
  apply_mask("dropout_backward", dx, dy, p, seed, step, tensor_id, row_offset);
}

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

void sum_squares(const TensorView& out, const TensorView& x) {
  const int64_t n = check_sum_squares(out, x);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += load(x, i) * load(x, i);
  write_scalar(out, read_scalar(out) + sum);
}

AdamWStepNumber adamw_step_number(const TensorView& scaler, const Ops::AdamWStep& hp) {
  const double lr = hp.host_lr();
  if (!hp.device.empty()) {  // the op's check saw the tensor's shape only
    if (!(lr >= 0.0) || !std::isfinite(lr))
      throw Error(Errc::invalid_argument,
                  fmt::format("adamw: lr = {} (from device memory) must be finite and >= 0", lr));
    if (scaler.empty() && !(hp.device.as<const double>()[Ops::AdamWStep::kDeviceStep] >= 1.0))
      throw Error(Errc::invalid_argument, fmt::format("adamw: step = {} (from device memory) must be at least 1",
                                                      hp.device.as<const double>()[Ops::AdamWStep::kDeviceStep]));
  }
  if (scaler.empty()) return {false, hp.host_step(), lr};
  const double* s = scaler.as<const double>();
  if (s[Ops::LossScaler::kFoundInf] != 0.0) return {true, 0, lr};
  return {false, static_cast<int64_t>(s[Ops::LossScaler::kOptimizerSteps]) + 1, lr};
}

float clip_coefficient(double sumsq, float max_norm) {
  // torch.nn.utils.clip_grad_norm_: total_norm (an f32 tensor), clip_coef =
  // max_norm / (total_norm + 1e-6), clamped to at most 1 (a NaN stays NaN).
  const float norm = static_cast<float>(std::sqrt(sumsq));
  const float coef = max_norm / (norm + 1e-6f);
  return coef > 1.0f ? 1.0f : coef;
}

void clip_scale(const TensorView& scale, const TensorView& sumsq, float max_norm) {
  check_clip_scale(scale, sumsq, max_norm);
  *scale.as<float>() = clip_coefficient(read_scalar(sumsq), max_norm);
}

// The f32 products of these ops are exact in double (two 24-bit
// significands), so rounding the double product once gives an f32 multiply's
// bits: the reference is the exact answer every backend must reproduce.
void loss_scale_multiply(const TensorView& x, const TensorView& scaler) {
  const int64_t n = check_loss_scale_multiply(x, scaler);
  const double scale = static_cast<float>(scaler.as<const double>()[Ops::LossScaler::kScale]);
  for (int64_t i = 0; i < n; ++i) store(x, i, static_cast<float>(load(x, i) * scale));
}

void loss_scale_unscale(const TensorView& g, const TensorView& scaler) {
  const int64_t n = check_loss_scale_unscale(g, scaler);
  double* s = scaler.as<double>();
  const double inv = inverse_loss_scale(static_cast<float>(s[Ops::LossScaler::kScale]));
  bool found_inf = false;
  for (int64_t i = 0; i < n; ++i) {
    const double v = load(g, i);
    if (!std::isfinite(v)) found_inf = true;
    store(g, i, static_cast<float>(v * inv));
  }
  if (found_inf) s[Ops::LossScaler::kFoundInf] = 1.0;
}

void loss_scale_update(const TensorView& scaler, float growth_factor, float backoff_factor, int growth_interval) {
  check_loss_scale_update(scaler, growth_factor, backoff_factor, growth_interval);
  update_loss_scaler_slots(scaler.as<double>(), growth_factor, backoff_factor, growth_interval);
}

void adamw(const TensorView& p, const TensorView& g, const TensorView& m, const TensorView& v,
           const TensorView& decay_ranges, const TensorView& grad_scale, const TensorView& scaler,
           const Ops::AdamWStep& hp) {
  const int64_t n = check_adamw(p, g, m, v, decay_ranges, grad_scale, scaler, hp);
  const AdamWStepNumber step = adamw_step_number(scaler, hp);
  if (step.skip) return;  // an inf/NaN gradient: p, m, v untouched
  const double lr = step.lr;
  const double s = grad_scale.empty() ? 1.0 : static_cast<double>(*grad_scale.as<const float>());
  const double t = static_cast<double>(step.t);
  const double bc1 = 1.0 - std::pow(hp.beta1, t), bc2 = 1.0 - std::pow(hp.beta2, t);
  // Which elements decay: all (unset view) or those inside a range.
  std::vector<char> decays(static_cast<size_t>(n), decay_ranges.rank == 0 ? 1 : 0);
  if (decay_ranges.rank != 0)
    for (int64_t r = 0; r < decay_ranges.dim(0); ++r)
      for (int64_t i = decay_ranges.as<const int64_t>()[2 * r]; i < decay_ranges.as<const int64_t>()[2 * r + 1]; ++i)
        decays[static_cast<size_t>(i)] = 1;
  float* pp = p.as<float>();
  float* mp = m.as<float>();
  float* vp = v.as<float>();
  const float* gp = g.as<const float>();
  for (int64_t i = 0; i < n; ++i) {
    const double gi = s * gp[i];
    double pi = pp[i];
    if (decays[static_cast<size_t>(i)]) pi *= 1.0 - lr * hp.weight_decay;
    const double mi = hp.beta1 * mp[i] + (1.0 - hp.beta1) * gi;
    const double vi = hp.beta2 * vp[i] + (1.0 - hp.beta2) * gi * gi;
    pi -= lr * (mi / bc1) / (std::sqrt(vi / bc2) + hp.eps);
    pp[i] = static_cast<float>(pi);
    mp[i] = static_cast<float>(mi);
    vp[i] = static_cast<float>(vi);
  }
}

}  // namespace stoke::cpu::ref
