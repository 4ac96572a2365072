// Reference backward of the data-movement and pooling ops: gather_rows
// (a scatter-add in row order) and pool (every token's gradient written);
// add, the sum of two gradient paths.
#include <vector>

#include "backend/op_checks_backward.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu::ref {

void gather_rows_backward(const TensorView& dh, const TensorView& dout, const TensorView& rows) {
  const auto [B, H] = check_gather_rows_backward(dh, dout, rows);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t r = index_at(rows, b);
    for (int64_t i = 0; i < H; ++i) store(dh, r * H + i, load(dh, r * H + i) + load(dout, b * H + i));
  }
}

void pool_backward(const TensorView& dh, const TensorView& dout, const TensorView& h, const TensorView& cu_seqlens,
                   PoolingMode mode) {
  const auto [T, B, H] = check_pool_backward(dh, dout, h, cu_seqlens, mode);
  for (int64_t i = 0; i < T * H; ++i) store(dh, i, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = index_at(cu_seqlens, b), len = index_at(cu_seqlens, b + 1) - first;
    if (len == 0) continue;
    for (int64_t i = 0; i < H; ++i) {
      const double g = load(dout, b * H + i);
      switch (mode) {
        case PoolingMode::cls: store(dh, first * H + i, g); break;
        case PoolingMode::lasttoken: store(dh, (first + len - 1) * H + i, g); break;
        case PoolingMode::max: {  // the first token holding the column's maximum
          int64_t arg = 0;
          for (int64_t t = 1; t < len; ++t)
            if (load(h, (first + t) * H + i) > load(h, (first + arg) * H + i)) arg = t;
          store(dh, (first + arg) * H + i, g);
          break;
        }
        case PoolingMode::mean:
        case PoolingMode::mean_sqrt_len: {
          const double scale = mode == PoolingMode::mean ? 1.0 / static_cast<double>(len)
                                                         : 1.0 / std::sqrt(static_cast<double>(len));
          for (int64_t t = 0; t < len; ++t) store(dh, (first + t) * H + i, g * scale);
          break;
        }
      }
    }
  }
}

void add(const TensorView& y, const TensorView& x) {
  const int64_t n = check_add(y, x);
  for (int64_t i = 0; i < n; ++i) store(y, i, static_cast<double>(static_cast<float>(load(y, i)) +
                                                                 static_cast<float>(load(x, i))));
}

}  // namespace stoke::cpu::ref
