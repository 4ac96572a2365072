// Data movement: gather_rows (and its backward, a scatter-add in row order),
// slice_columns, convert; add, the sum of two gradient paths. Values pass
// through float, so a dtype change rounds once (to nearest even) and a
// same-dtype copy is exact.
#include <vector>

#include "backend/op_checks.h"
#include "cpu/ref/ref_ops.h"
#include "backend/op_checks_backward.h"

namespace stoke::cpu::ref {

void gather_rows(const TensorView& out, const TensorView& h, const TensorView& rows) {
  const auto [B, H] = check_gather_rows(out, h, rows);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < H; ++i) store(out, b * H + i, load(h, index_at(rows, b) * H + i));
}

void slice_columns(const TensorView& out, const TensorView& in) {
  const auto [B, D] = check_slice_columns(out, in);
  const int64_t Din = in.dim(1);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < D; ++i) store(out, b * D + i, load(in, b * Din + i));
}

void convert(const TensorView& out, const TensorView& in) {
  const int64_t n = check_convert(out, in);
  for (int64_t i = 0; i < n; ++i) store(out, i, load(in, i));
}

// ---- backward

void gather_rows_backward(const TensorView& dh, const TensorView& dout, const TensorView& rows) {
  const auto [B, H] = check_gather_rows_backward(dh, dout, rows);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t r = index_at(rows, b);
    for (int64_t i = 0; i < H; ++i) store(dh, r * H + i, load(dh, r * H + i) + load(dout, b * H + i));
  }
}

void add(const TensorView& y, const TensorView& x) {
  const int64_t n = check_add(y, x);
  for (int64_t i = 0; i < n; ++i) store(y, i, static_cast<double>(static_cast<float>(load(y, i)) +
                                                                 static_cast<float>(load(x, i))));
}

}  // namespace stoke::cpu::ref
