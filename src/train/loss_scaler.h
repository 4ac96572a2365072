// fp16 training's dynamic loss scale, with torch.amp.GradScaler's semantics:
// the loss is multiplied by `scale` before backward (so small f16 gradients
// do not flush to zero); the gradients are unscaled (times 1 / scale) and
// checked for inf/NaN before the optimizer step; a step with an inf/NaN is
// skipped (parameters and optimizer state untouched) and the scale backs
// off; after `growth_interval` clean steps in a row the scale grows.
// bf16 has f32's exponent range and needs no scaler.
//
// The state is a few numbers that live where the step runs: on the CUDA
// backend in device memory, updated by a kernel from the device-side
// found-inf flag (no host read in the step), on the CPU in host memory. The
// update rule is one header-only function so both compile the same code;
// tests/train/test_loss_scaler.cc checks it against torch's numbers
// (tests/golden/loss_scaler/, made by the script there).
#pragma once

#include <cstdint>
#include <span>

#if defined(__CUDACC__)
#define STOKE_LOSS_SCALER_FN __host__ __device__ inline
#else
#define STOKE_LOSS_SCALER_FN inline
#endif

namespace stoke {

// torch.amp.GradScaler's defaults.
struct LossScalerConfig {
  float init_scale = 65536.0f;
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int32_t growth_interval = 2000;
};

// Plain numbers, so the same struct is the device buffer's layout and a
// checkpoint's record.
struct LossScalerState {
  float scale = 65536.0f;
  int32_t growth_tracker = 0;  // clean steps in a row since the last change
  int64_t skipped_steps = 0;   // steps skipped for an inf/NaN gradient
  int64_t optimizer_steps = 0; // steps taken (AdamW's t: skipped steps do not count, as in torch)
};

inline LossScalerState initial_loss_scaler_state(const LossScalerConfig& c) {
  LossScalerState s;
  s.scale = c.init_scale;
  return s;
}

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

inline void update_loss_scaler(LossScalerState& s, bool found_inf, const LossScalerConfig& c) {
  update_loss_scaler(s, found_inf, c.growth_factor, c.backoff_factor, c.growth_interval);
}

// torch's inverse scale: 1 / scale computed in double, rounded to f32 once.
STOKE_LOSS_SCALER_FN float inverse_loss_scale(float scale) {
  return static_cast<float>(1.0 / static_cast<double>(scale));
}

// The CPU form of the unscale-and-check pass (torch's
// _amp_foreach_non_finite_check_and_unscale_): every gradient times
// inv_scale in f32, in place; true when any gradient was inf or NaN (all
// are multiplied all the same, as torch does: the step is then skipped and
// the trainer zeroes them for the next).
bool unscale_and_check(std::span<float> grads, float inv_scale);

}  // namespace stoke
