// Fast kernels of the training ops (backend/ops.h, "training: dropout, loss,
// optimizer"): fast_train_dropout.cc, fast_train_loss.cc, fast_train_optim.cc.
// Same contract as the reference set (cpu/ref/ref_train.h), checked by the
// same cpu/ref/train_checks.
#pragma once

#include "backend/ops.h"

namespace stoke::cpu::fast {

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

}  // namespace stoke::cpu::fast
