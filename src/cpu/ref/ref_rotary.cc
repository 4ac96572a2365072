// rotary and rotary_backward: the rotation of every (a, b) pair written out
// plainly, in double; the angle is the f32 product the contract names.
#include <cmath>

#include "cpu/ref/ref_ops.h"
#include "backend/rotary_checks.h"

namespace stoke::cpu::ref {

namespace {

// sign = +1 rotates by +angle (forward), -1 by -angle (backward).
void rotate(const char* op, const TensorView& x, const TensorView& cu_seqlens, const TensorView& inv_freq,
            const Ops::Rotary& rope, double sign) {
  const RotaryShape s = check_rotary(op, x, cu_seqlens, inv_freq, rope);
  const float* freq = inv_freq.as<const float>();
  for (int64_t b = 0; b < s.B; ++b) {
    const int32_t begin = index_at(cu_seqlens, b), end = index_at(cu_seqlens, b + 1);
    for (int32_t t = begin; t < end; ++t) {
      const float p = static_cast<float>(t - begin);
      for (int h = 0; h < rope.heads; ++h) {
        const int64_t base = t * s.C + int64_t{h} * rope.head_dim;
        for (int64_t i = 0; i < s.half; ++i) {
          const float angle = freq[i] * p;  // rounded to f32, as HF's freqs are
          const double c = std::cos(static_cast<double>(angle)) * rope.scale;
          const double sn = sign * std::sin(static_cast<double>(angle)) * rope.scale;
          const int64_t ia = base + (rope.interleaved ? 2 * i : i);
          const int64_t ib = base + (rope.interleaved ? 2 * i + 1 : i + s.half);
          const double a = load(x, ia), bv = load(x, ib);
          store(x, ia, a * c - bv * sn);
          store(x, ib, bv * c + a * sn);
        }
      }
    }
  }
}

}  // namespace

void rotary(const TensorView& x, const TensorView& cu_seqlens, const TensorView& inv_freq, const Ops::Rotary& rope) {
  rotate("rotary", x, cu_seqlens, inv_freq, rope, 1.0);
}

void rotary_backward(const TensorView& dx, const TensorView& cu_seqlens, const TensorView& inv_freq,
                     const Ops::Rotary& rope) {
  rotate("rotary_backward", dx, cu_seqlens, inv_freq, rope, -1.0);
}

}  // namespace stoke::cpu::ref
