// Shape checks of the relative-position attention ops (op_list.h:
// attention_relpos*): the attention checks plus rel[2*max_seqlen - 1, heads] f32.
#pragma once

#include "backend/ops.h"
#include "cpu/ref/op_checks.h"
#include "cpu/ref/op_checks_backward.h"

namespace stoke::cpu {

// rel (and drel when given) must be [2*max_seqlen - 1, heads] f32.
void check_relpos_table(const char* op, const TensorView& rel, int heads, int max_seqlen);

}  // namespace stoke::cpu
