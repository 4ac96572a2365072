// Reference loss-scale ops of f16 training (torch.amp.GradScaler): the
// scaler's slots and update rule are backend/loss_scale_rule.h's.
#include <cmath>

#include "cpu/ref/ref_ops.h"
#include "backend/train_checks.h"
#include "backend/loss_scale_rule.h"

namespace stoke::cpu::ref {

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

}  // namespace stoke::cpu::ref
