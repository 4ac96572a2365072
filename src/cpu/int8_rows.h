// The dynamic per-row activation quantization of linear_int8, written once
// in plain f32 arithmetic (contract: backend/op_list.h). The reference
// kernel uses it as is; the fast kernel's vector version must give the same
// bytes (tests/ops/test_int8_linear.cc checks that).
#pragma once

#include <cmath>
#include <cstdint>

#include "cpu/kernels.h"

namespace stoke::cpu {

// A row's range, widened to hold 0 (so 0 is coded exactly): lo <= 0 <= hi.
struct RowRange {
  float lo = 0, hi = 0;
};
inline RowRange row_range(const float* x, int64_t K) {
  RowRange r;
  for (int64_t k = 0; k < K; ++k) {
    r.lo = std::fmin(r.lo, x[k]);
    r.hi = std::fmax(r.hi, x[k]);
  }
  return r;
}

// How one row is coded: x ~ scale * (q - zero), q in [0, code.levels].
struct RowCode {
  float scale = 0;  // 0 for a zero row (every q = 0, zero = 0)
  int32_t zero = 0;
  float inv = 0;    // levels / (hi - lo): what x is multiplied by
};
inline RowCode row_code(RowRange r, Int8ActivationCode code) {
  RowCode c;
  const float span = r.hi - r.lo;
  if (!(span > 0.0f)) return c;
  const float levels = static_cast<float>(code.levels);
  c.inv = levels / span;
  c.scale = span / levels;
  c.zero = static_cast<int32_t>(std::fmin(std::fmax(std::nearbyint(-r.lo * c.inv), 0.0f), levels));
  return c;
}

// q[k] = clamp(round-to-nearest-even(x[k] * inv) + zero, 0, levels).
inline void quantize_with(const float* x, int64_t K, RowCode c, Int8ActivationCode code, uint8_t* q) {
  const float levels = static_cast<float>(code.levels), zero = static_cast<float>(c.zero);
  for (int64_t k = 0; k < K; ++k)
    q[k] = static_cast<uint8_t>(std::fmin(std::fmax(std::nearbyint(x[k] * c.inv) + zero, 0.0f), levels));
}

inline RowCode quantize_row(const float* x, int64_t K, Int8ActivationCode code, uint8_t* q) {
  const RowCode c = row_code(row_range(x, K), code);
  quantize_with(x, K, c, code, q);
  return c;
}

}  // namespace stoke::cpu
