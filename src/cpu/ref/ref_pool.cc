// pool and l2_normalize: per-sequence reductions into f32 vectors. An empty
// sequence pools to zeros in every mode. pool_backward writes every token's
// gradient.
#include <algorithm>
#include <vector>

#include "backend/op_checks.h"
#include "cpu/ref/ref_ops.h"
#include "backend/op_checks_backward.h"

namespace stoke::cpu::ref {

void pool(const TensorView& out, const TensorView& h, const TensorView& cu_seqlens, Pooling mode) {
  const auto [T, B, H] = check_pool(out, h, cu_seqlens);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = index_at(cu_seqlens, b), len = index_at(cu_seqlens, b + 1) - first;
    for (int64_t i = 0; i < H; ++i) {
      double v = 0.0;
      if (len > 0) {
        switch (mode) {
          case Pooling::cls: v = load(h, first * H + i); break;
          case Pooling::lasttoken: v = load(h, (first + len - 1) * H + i); break;
          case Pooling::max:
            v = load(h, first * H + i);
            for (int64_t t = 1; t < len; ++t) v = std::max(v, load(h, (first + t) * H + i));
            break;
          case Pooling::mean:
          case Pooling::mean_sqrt_len: {
            double sum = 0.0;
            for (int64_t t = 0; t < len; ++t) sum += load(h, (first + t) * H + i);
            v = mode == Pooling::mean ? sum / static_cast<double>(len) : sum / std::sqrt(static_cast<double>(len));
            break;
          }
        }
      }
      store(out, b * H + i, v);
    }
  }
}

void l2_normalize(const TensorView& x) {
  const auto [B, D] = check_l2_normalize(x);
  for (int64_t b = 0; b < B; ++b) {
    double ss = 0.0;
    for (int64_t i = 0; i < D; ++i) ss += load(x, b * D + i) * load(x, b * D + i);
    const double norm = std::max(std::sqrt(ss), 1e-12);
    for (int64_t i = 0; i < D; ++i) store(x, b * D + i, load(x, b * D + i) / norm);
  }
}

// ---- backward

void pool_backward(const TensorView& dh, const TensorView& dout, const TensorView& h, const TensorView& cu_seqlens,
                   Pooling mode) {
  const auto [T, B, H] = check_pool_backward(dh, dout, h, cu_seqlens, mode);
  for (int64_t i = 0; i < T * H; ++i) store(dh, i, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = index_at(cu_seqlens, b), len = index_at(cu_seqlens, b + 1) - first;
    if (len == 0) continue;
    for (int64_t i = 0; i < H; ++i) {
      const double g = load(dout, b * H + i);
      switch (mode) {
        case Pooling::cls: store(dh, first * H + i, g); break;
        case Pooling::lasttoken: store(dh, (first + len - 1) * H + i, g); break;
        case Pooling::max: {  // the first token holding the column's maximum
          int64_t arg = 0;
          for (int64_t t = 1; t < len; ++t)
            if (load(h, (first + t) * H + i) > load(h, (first + arg) * H + i)) arg = t;
          store(dh, (first + arg) * H + i, g);
          break;
        }
        case Pooling::mean:
        case Pooling::mean_sqrt_len: {
          const double scale = mode == Pooling::mean ? 1.0 / static_cast<double>(len)
                                                         : 1.0 / std::sqrt(static_cast<double>(len));
          for (int64_t t = 0; t < len; ++t) store(dh, (first + t) * H + i, g * scale);
          break;
        }
      }
    }
  }
}

}  // namespace stoke::cpu::ref
