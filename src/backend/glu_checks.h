// Shape checks of the gated-MLP ops (op_list.h: glu, glu_backward), shared by
// every backend's kernels.
#pragma once

#include "backend/ops.h"
#include "backend/op_checks.h"

namespace stoke {

// out[T, N] and x[T, 2N] activations of one dtype, apart. Returns {T, N}.
RowsShape check_glu(const TensorView& out, const TensorView& x, const Ops::Glu& glu);
// dx[T, 2N] (x's dtype or f32; it may be x itself, nothing else of the
// inputs), dout[T, N] and x[T, 2N]. Returns {T, N}.
RowsShape check_glu_backward(const TensorView& dx, const TensorView& dout, const TensorView& x, const Ops::Glu& glu);

}  // namespace stoke
