// What the optimizer kernels of the reference set (ref_optimizer.cc) share
// with the fast set (the kernels themselves are declared with all the others
// in ref_ops.h).
#pragma once

#include <cstdint>

#include "backend/ops.h"

namespace stoke::cpu::ref {

// Which AdamW step a call takes (shared with the fast set): without a loss
// scaler, hp.step (or its device value); with one, none when its found-inf
// flag is set (skip), else the steps it has counted + 1. lr: hp.lr or its
// device value (Ops::AdamWStep::device), checked here when it came from there.
struct AdamWStepNumber {
  bool skip = false;
  int64_t t = 1;
  double lr = 0.0;
};
AdamWStepNumber adamw_step_number(const TensorView& scaler, const Ops::AdamWStep& hp);

// The f32 clipping coefficient of clip_scale (shared with the fast set: it is
// one scalar, and both sets must give the same bits).
float clip_coefficient(double sumsq, float max_norm);

}  // namespace stoke::cpu::ref
