// fp16 training's dynamic loss scale, with torch.amp.GradScaler's semantics:
// the loss is multiplied by `scale` before backward (so small f16 gradients
// do not flush to zero); the gradients are unscaled (times 1 / scale) and
// checked for inf/NaN before the optimizer step; a step with an inf/NaN is
// skipped (parameters and optimizer state untouched) and the scale backs
// off; after `growth_interval` clean steps in a row the scale grows.
// bf16 has f32's exponent range and needs no scaler.
//
// The state is a few numbers in the backend's memory (device memory on a
// GPU), in the ops' scaler tensor (Ops::LossScaler, backend/ops.h), read and
// written only by the ops loss_scale_multiply / loss_scale_unscale / adamw /
// loss_scale_update: no host read in the step. The state's layout and the
// update rule are backend/loss_scale_rule.h, header-only, so every
// backend's loss_scale_update (CPU and CUDA) compiles the same code;
// tests/train/test_loss_scaler.cc checks it against torch's numbers
// (tests/golden/loss_scaler/, made by the script there).
#pragma once

#include <cstdint>
#if !defined(__CUDACC__)  // the CUDA sources are C++17: no std::span (unscale_and_check is host code)
#include <span>
#endif

#include "backend/loss_scale_rule.h"

namespace stoke {

// torch.amp.GradScaler's defaults.
struct LossScalerConfig {
  float init_scale = 65536.0f;
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int32_t growth_interval = 2000;
};

inline LossScalerState initial_loss_scaler_state(const LossScalerConfig& c) {
  LossScalerState s;
  s.scale = c.init_scale;
  return s;
}

inline void update_loss_scaler(LossScalerState& s, bool found_inf, const LossScalerConfig& c) {
  update_loss_scaler(s, found_inf, c.growth_factor, c.backoff_factor, c.growth_interval);
}

// The CPU form of the unscale-and-check pass (torch's
// _amp_foreach_non_finite_check_and_unscale_): every gradient times
// inv_scale in f32, in place; true when any gradient was inf or NaN (all
// are multiplied all the same, as torch does: the step is then skipped and
// the trainer zeroes them for the next).
#if !defined(__CUDACC__)
bool unscale_and_check(std::span<float> grads, float inv_scale);
#endif

}  // namespace stoke
