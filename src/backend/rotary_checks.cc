#include "backend/rotary_checks.h"

#include <cmath>

#include <fmt/format.h>

#include "backend/check_helpers.h"

namespace stoke {

using namespace checks;

RotaryShape check_rotary(const char* op, const TensorView& x, const TensorView& cu_seqlens,
                         const TensorView& inv_freq, const Ops::Rotary& rope, IndexData where) {
  need(op, "x", x, 2);
  need_act(op, "x", x);
  need(op, "inv_freq", inv_freq, 1);
  need_dtype(op, "inv_freq", inv_freq, DType::f32);
  if (rope.heads < 0) fail(op, fmt::format("heads = {}, expected >= 0", rope.heads));
  if (rope.head_dim < 1) fail(op, fmt::format("head_dim = {}, expected >= 1", rope.head_dim));
  if (!std::isfinite(rope.scale)) fail(op, fmt::format("scale = {}, expected a finite number", rope.scale));
  const int64_t T = x.dim(0), C = x.dim(1), half = inv_freq.dim(0);
  if (int64_t{rope.heads} * rope.head_dim > C)
    fail(op, fmt::format("x is {}: fewer columns than heads * head_dim = {} * {}", x.shape_string(), rope.heads,
                         rope.head_dim));
  if (2 * half > rope.head_dim)
    fail(op, fmt::format("inv_freq has {} frequencies: rotating {} columns, more than head_dim = {}", half, 2 * half,
                         rope.head_dim));
  need_no_overlap(op, "x", x, "inv_freq", inv_freq);
  const int64_t B = need_cu_seqlens(op, cu_seqlens, T, where);
  return {T, B, C, half};
}

}  // namespace stoke
