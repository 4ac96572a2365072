// Reference dropout and dropout_backward: the mask from Philox, plain loops
// in double; every stored value is rounded once.
#include "core/philox.h"
#include "cpu/ref/ref_ops.h"
#include "backend/train_checks.h"

namespace stoke::cpu::ref {

namespace {

// out = x * factor_i, factor_i = 1 / (1 - p) (as an f32) where element i is
// kept and 0 where it is dropped: x * 0 keeps torch's NaN * 0 = NaN. The f32
// product of x and the factor is exact in double (two 24-bit significands), so
// rounding it once to float gives the very bits of an f32 multiply.
void apply_mask(const char* op, const TensorView& out, const TensorView& x, float p, uint64_t seed,
                const Ops::DropoutStep& step_from, uint32_t tensor_id, uint64_t row_offset) {
  const DropoutRange r = check_dropout(op, out, x, p, step_from, row_offset);
  const uint32_t step = step_from.host_value();  // read now, when the op runs
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  for (int64_t i = 0; i < r.n; ++i) {
    const bool keep = philox::element_uniform(seed, step, tensor_id, r.first + static_cast<uint64_t>(i)) >= p;
    store(out, i, load(x, i) * static_cast<double>(keep ? scale : 0.0f));
  }
}

}  // namespace

void dropout(const TensorView& out, const TensorView& x, float p, uint64_t seed, const Ops::DropoutStep& step,
             uint32_t tensor_id, uint64_t row_offset) {
  apply_mask("dropout", out, x, p, seed, step, tensor_id, row_offset);
}

// The mask is a function of (seed, step, tensor_id, index) only, so the
// backward is the forward applied to dy.
void dropout_backward(const TensorView& dx, const TensorView& dy, float p, uint64_t seed,
                      const Ops::DropoutStep& step, uint32_t tensor_id, uint64_t row_offset) {
  apply_mask("dropout_backward", dx, dy, p, seed, step, tensor_id, row_offset);
}

}  // namespace stoke::cpu::ref
