// Shape checks of the rotary position embedding ops (op_list.h: rotary,
// rotary_backward), shared by every backend's kernels.
#pragma once

#include <cstdint>

#include "backend/ops.h"
#include "backend/op_checks.h"

namespace stoke {

struct RotaryShape {
  int64_t T, B, C;  // tokens, sequences, columns of x
  int64_t half;     // rotated pairs per head: R / 2 = inv_freq's length
};

// x[T, C] an activation with C >= heads * head_dim; inv_freq[half] f32 with
// 2 * half <= head_dim; cu_seqlens[B + 1] over T; heads >= 0, head_dim >= 1;
// scale finite. `op` names the op in messages (rotary or rotary_backward).
RotaryShape check_rotary(const char* op, const TensorView& x, const TensorView& cu_seqlens,
                         const TensorView& inv_freq, const Ops::Rotary& rope, IndexData where = IndexData::host);

}  // namespace stoke
