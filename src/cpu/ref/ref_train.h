// Reference kernels of the training ops (backend/ops.h, "training: dropout,
// loss, optimizer"): plain loops in double, each result rounded once when
// stored, as the rest of cpu/ref. ref_train.cc holds them.
#pragma once

#include "backend/ops.h"

namespace stoke::cpu::ref {

void dropout(const TensorView& out, const TensorView& x, float p, uint64_t seed, uint32_t step, uint32_t tensor_id);
void dropout_backward(const TensorView& dx, const TensorView& dy, float p, uint64_t seed, uint32_t step,
                      uint32_t tensor_id);
void cross_entropy(const TensorView& dlogits, const TensorView& metrics, const TensorView& logits,
                   const TensorView& labels, float label_smoothing, float scale);
void mse_loss(const TensorView& dpred, const TensorView& metrics, const TensorView& pred, const TensorView& target,
              float scale);
void sum_squares(const TensorView& out, const TensorView& x);
void clip_scale(const TensorView& scale, const TensorView& sumsq, float max_norm);
void adamw(const TensorView& p, const TensorView& g, const TensorView& m, const TensorView& v,
           const TensorView& decay_ranges, const TensorView& grad_scale, const Ops::AdamWStep& hp);

// The f32 clipping coefficient of clip_scale (shared with the fast set: it is
// one scalar, and both sets must give the same bits).
float clip_coefficient(double sumsq, float max_norm);

}  // namespace stoke::cpu::ref
