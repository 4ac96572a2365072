#include "backend/glu_checks.h"

#include <fmt/format.h>

#include "backend/check_helpers.h"

namespace stoke {

using namespace checks;

namespace {

// x[T, 2N] with an even number of columns; a known activation.
int64_t check_fused_input(const char* op, const TensorView& x, const Ops::Glu& glu) {
  need(op, "x", x, 2);
  need_act(op, "x", x);
  if (x.dim(1) % 2 != 0)
    fail(op, fmt::format("x is {}: expected [T, 2N], the gate and up halves side by side", x.shape_string()));
  if (glu.act != Ops::Glu::Act::silu && glu.act != Ops::Glu::Act::gelu_erf)
    fail(op, fmt::format("activation {}: expected silu or gelu_erf", static_cast<int>(glu.act)));
  return x.dim(1) / 2;
}

}  // namespace

RowsShape check_glu(const TensorView& out, const TensorView& x, const Ops::Glu& glu) {
  const char* op = "glu";
  const int64_t N = check_fused_input(op, x, glu);
  need(op, "out", out, 2);
  need_dtype(op, "out", out, x.dtype);
  need_dim(op, "out", out, 0, x.dim(0));
  need_dim(op, "out", out, 1, N);
  need_no_overlap(op, "out", out, "x", x);
  return {x.dim(0), N};
}

RowsShape check_glu_backward(const TensorView& dx, const TensorView& dout, const TensorView& x, const Ops::Glu& glu) {
  const char* op = "glu_backward";
  const int64_t N = check_fused_input(op, x, glu);
  need(op, "dout", dout, 2);
  if (dout.dtype != x.dtype && dout.dtype != DType::f32)
    fail(op, fmt::format("dout is {}, expected F32 or x's dtype {}", describe(dout), dtype_name(x.dtype)));
  need_dim(op, "dout", dout, 0, x.dim(0));
  need_dim(op, "dout", dout, 1, N);
  need(op, "dx", dx, 2);
  if (dx.dtype != x.dtype && dx.dtype != DType::f32)
    fail(op, fmt::format("dx is {}, expected F32 or x's dtype {}", describe(dx), dtype_name(x.dtype)));
  need_dim(op, "dx", dx, 0, x.dim(0));
  need_dim(op, "dx", dx, 1, 2 * N);
  const bool same_as_x = dx.data == x.data && dx.dtype == x.dtype;  // in place: each pair read before written
  if (!same_as_x) need_no_overlap(op, "dx", dx, "x", x);
  need_no_overlap(op, "dx", dx, "dout", dout);
  return {x.dim(0), N};
}

}  // namespace stoke
