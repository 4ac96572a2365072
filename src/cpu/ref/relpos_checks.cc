#include "cpu/ref/relpos_checks.h"

#include "cpu/ref/check_helpers.h"

namespace stoke::cpu {

using namespace checks;

void check_relpos_table(const char* op, const TensorView& rel, int heads, int max_seqlen) {
  need(op, "rel", rel, 2);
  need_dtype(op, "rel", rel, DType::f32);
  need_dim(op, "rel", rel, 0, 2 * static_cast<int64_t>(max_seqlen) - 1);
  need_dim(op, "rel", rel, 1, heads);
}

}  // namespace stoke::cpu
