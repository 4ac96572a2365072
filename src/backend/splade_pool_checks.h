// The shape, dtype and value checks of splade_pool (backend/op_list.h),
// shared by every backend.
#pragma once

#include <cstdint>

#include "backend/op_checks.h"
#include "backend/ops.h"

namespace stoke {

struct SpladePoolShape {
  int64_t R = 0;  // logits rows: the block's tokens
  int64_t V = 0;  // the vocabulary
  int64_t B = 0;  // sequences
};

// Throws Error(invalid_argument) "splade_pool: ..." naming the tensor or
// knob: logits [R, V] f32, out [B, V] f32 (no overlap), cu_seqlens [B + 1]
// i32 (on the host: starting at 0, non-decreasing), first_row >= 0,
// log1p_count 1 or 2.
SpladePoolShape check_splade_pool(const TensorView& out, const TensorView& logits, const TensorView& cu_seqlens,
                                  const Ops::SpladePool& p, IndexData where = IndexData::host);

}  // namespace stoke
