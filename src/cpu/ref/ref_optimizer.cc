// Reference optimizer step: the gradient's sum of squares, the clipping
// coefficient, AdamW. Plain loops in double; every stored value is rounded
// once.
#include "cpu/ref/ref_optimizer.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "cpu/ref/ref_ops.h"
#include "backend/train_checks.h"

namespace stoke::cpu::ref {

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
