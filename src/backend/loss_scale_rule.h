// The loss scaler's state in the ops' scaler tensor (Ops::LossScaler) and
// its update rule, torch.amp.GradScaler's (train/loss_scaler.h says what the
// scaler is for). Here, beside the op list, because the ops that read and
// write the tensor (loss_scale_multiply / _unscale / _update, adamw) are every
// backend's: one header-only rule that the CPU kernels and the CUDA kernels
// compile alike, and no backend reaches up into train/.
#pragma once

#include <cstdint>

#include "backend/ops.h"

#if defined(__CUDACC__)
#define STOKE_LOSS_SCALER_FN __host__ __device__ inline
#else
#define STOKE_LOSS_SCALER_FN inline
#endif

namespace stoke {

// Plain numbers: a checkpoint's record, and (through the slot functions
// below) the ops' scaler tensor.
struct LossScalerState {
  float scale = 65536.0f;
  int32_t growth_tracker = 0;  // clean steps in a row since the last change
  int64_t skipped_steps = 0;   // steps skipped for an inf/NaN gradient
  int64_t optimizer_steps = 0; // steps taken (AdamW's t: skipped steps do not count, as in torch)
};

// After one step's gradients were checked (torch._amp_update_scale_): on an
// inf/NaN the step was skipped and the scale backs off; otherwise the step
// counts, and the growth_interval-th clean step in a row grows the scale —
// unless the grown scale would not be finite (then it stays).
STOKE_LOSS_SCALER_FN void update_loss_scaler(LossScalerState& s, bool found_inf, float growth_factor,
                                                 float backoff_factor, int32_t growth_interval) {
  if (found_inf) {
    s.scale *= backoff_factor;
    s.growth_tracker = 0;
    ++s.skipped_steps;
    return;
  }
  ++s.optimizer_steps;
  const int32_t clean = s.growth_tracker + 1;
  if (clean == growth_interval) {
    const float grown = s.scale * growth_factor;
    if (grown <= 3.40282347e38f) s.scale = grown;  // finite (the scale is positive, never NaN)
    s.growth_tracker = 0;
  } else {
    s.growth_tracker = clean;
  }
}

// The state in the ops' scaler tensor (f64 [Ops::LossScaler::kSlots]) and back.
STOKE_LOSS_SCALER_FN LossScalerState loss_scaler_from_slots(const double* slots) {
  LossScalerState s;
  s.scale = static_cast<float>(slots[Ops::LossScaler::kScale]);
  s.growth_tracker = static_cast<int32_t>(slots[Ops::LossScaler::kGrowthTracker]);
  s.skipped_steps = static_cast<int64_t>(slots[Ops::LossScaler::kSkippedSteps]);
  s.optimizer_steps = static_cast<int64_t>(slots[Ops::LossScaler::kOptimizerSteps]);
  return s;
}
STOKE_LOSS_SCALER_FN void loss_scaler_to_slots(const LossScalerState& s, bool found_inf, double* slots) {
  slots[Ops::LossScaler::kScale] = static_cast<double>(s.scale);
  slots[Ops::LossScaler::kGrowthTracker] = static_cast<double>(s.growth_tracker);
  slots[Ops::LossScaler::kFoundInf] = found_inf ? 1.0 : 0.0;
  slots[Ops::LossScaler::kSkippedSteps] = static_cast<double>(s.skipped_steps);
  slots[Ops::LossScaler::kOptimizerSteps] = static_cast<double>(s.optimizer_steps);
}

// The op loss_scale_update on the slots, on every backend: the update from
// the found-inf flag, which is then cleared for the next step.
STOKE_LOSS_SCALER_FN void update_loss_scaler_slots(double* slots, float growth_factor, float backoff_factor,
                                                   int32_t growth_interval) {
  LossScalerState s = loss_scaler_from_slots(slots);
  update_loss_scaler(s, slots[Ops::LossScaler::kFoundInf] != 0.0, growth_factor, backoff_factor, growth_interval);
  loss_scaler_to_slots(s, false, slots);
}

// torch's inverse scale: 1 / scale computed in double, rounded to f32 once.
STOKE_LOSS_SCALER_FN float inverse_loss_scale(float scale) {
  return static_cast<float>(1.0 / static_cast<double>(scale));
}

}  // namespace stoke
