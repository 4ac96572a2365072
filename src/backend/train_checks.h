// Shape, dtype and value checks of the training ops of the op table
// (backend/op_list.h, "training: dropout, loss, optimizer"), shared by the
// reference and the fast CPU kernels so both accept exactly the same calls.
// Every check throws Error(invalid_argument) naming the op, the tensor, what it
// got and what was expected. Index tensors (labels, decay ranges) are read: a
// bad index would otherwise be a wild read or write.
#pragma once

#include <cstdint>

#include "backend/ops.h"
#include "backend/op_checks.h"

namespace stoke {

// The elements a dropout call masks: n of them, drawn at flat indices
// [first, first + n) of the whole batch's tensor (first = row_offset x the
// elements of one row of x).
struct DropoutRange {
  int64_t n = 0;
  uint64_t first = 0;
};
// out and x are activations of one dtype and one shape, out is x itself or
// does not overlap it, p in [0, 1], and the indices with row_offset fit 64 bits.
// step: a device step must be U32 [1] (its value is not read here).
DropoutRange check_dropout(const char* op, const TensorView& out, const TensorView& x, float p,
                           const Ops::DropoutStep& step, uint64_t row_offset);
void need_dropout_step(const char* op, const Ops::DropoutStep& step);

struct LossShape {
  int64_t B, C;  // rows (examples) and classes (1 for mse_loss)
};
// IndexData::device: the labels live on the device and are not range-checked here.
LossShape check_cross_entropy(const TensorView& dlogits, const TensorView& metrics, const TensorView& logits,
                              const TensorView& labels, float label_smoothing, float scale,
                              IndexData where = IndexData::host);
LossShape check_mse_loss(const TensorView& dpred, const TensorView& metrics, const TensorView& pred,
                         const TensorView& target, float scale);

int64_t check_sum_squares(const TensorView& out, const TensorView& x);  // numel of x
void check_clip_scale(const TensorView& scale, const TensorView& sumsq, float max_norm);

// The loss-scale ops (f16 training): scaler is an f64 [Ops::LossScaler::kSlots]
// tensor; x / g an activation tensor of any shape apart from it (numel returned).
int64_t check_loss_scale_multiply(const TensorView& x, const TensorView& scaler);
int64_t check_loss_scale_unscale(const TensorView& g, const TensorView& scaler);
void check_loss_scale_update(const TensorView& scaler, float growth_factor, float backoff_factor,
                             int growth_interval);

// Element count of the group; the decay ranges are sorted, disjoint and inside
// it; scaler (may be empty) a loss-scaler tensor apart from p, g, m, v.
int64_t check_adamw(const TensorView& p, const TensorView& g, const TensorView& m, const TensorView& v,
                    const TensorView& decay_ranges, const TensorView& grad_scale, const TensorView& scaler,
                    const Ops::AdamWStep& hp);

// A scalar of a one-element f64 or f32 tensor, and its store (by dtype).
double read_scalar(const TensorView& t);
void write_scalar(const TensorView& t, double v);

}  // namespace stoke
