// What the training kernels of the reference set share with the fast set
// (the kernels themselves are declared with all the others in ref_ops.h).
#pragma once

namespace stoke::cpu::ref {

// The f32 clipping coefficient of clip_scale (shared with the fast set: it is
// one scalar, and both sets must give the same bits).
float clip_coefficient(double sumsq, float max_norm);

}  // namespace stoke::cpu::ref
