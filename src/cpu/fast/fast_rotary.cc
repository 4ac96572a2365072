// rotary and rotary_backward: the cos/sin table is built once per call for
// the positions the batch has (0 .. longest sequence - 1, shared by every
// sequence and head), then threads go over tokens, rotating each head's
// pairs in f32 (one contiguous run of pairs per head in the NeoX layout).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_ops.h"
#include "backend/rotary_checks.h"

namespace stoke::cpu::fast {

namespace {

// One head's pairs: a at x[ia(i)], b at x[ib(i)], rotated by (c[i], s[i]).
template <class T>
STOKE_CPU_CLONES void rotate_half_head(T* x, const float* c, const float* s, int64_t half) {
  T* xb = x + half;
  for (int64_t i = 0; i < half; ++i) {
    const float a = to_float(x[i]), b = to_float(xb[i]);
    x[i] = narrow_one<T>(a * c[i] - b * s[i]);
    xb[i] = narrow_one<T>(b * c[i] + a * s[i]);
  }
}

template <class T>
STOKE_CPU_CLONES void rotate_interleaved_head(T* x, const float* c, const float* s, int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    const float a = to_float(x[2 * i]), b = to_float(x[2 * i + 1]);
    x[2 * i] = narrow_one<T>(a * c[i] - b * s[i]);
    x[2 * i + 1] = narrow_one<T>(b * c[i] + a * s[i]);
  }
}

void rotate(const char* op, const TensorView& x, const TensorView& cu_seqlens, const TensorView& inv_freq,
            const Ops::Rotary& rope, float sign) {
  const RotaryShape shape = check_rotary(op, x, cu_seqlens, inv_freq, rope);
  const int64_t T = shape.T, B = shape.B, C = shape.C, half = shape.half;
  const int heads = rope.heads, head_dim = rope.head_dim;
  const bool interleaved = rope.interleaved;
  if (T == 0 || half == 0 || heads == 0) return;
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  std::vector<int32_t> position(static_cast<size_t>(T));
  int64_t longest = 0;
  for (int64_t b = 0; b < B; ++b) {
    longest = std::max<int64_t>(longest, cu[b + 1] - cu[b]);
    for (int32_t t = cu[b]; t < cu[b + 1]; ++t) position[static_cast<size_t>(t)] = t - cu[b];
  }
  // table[p] = {cos[0..half), sign * sin[0..half)} for position p.
  std::vector<float> table(static_cast<size_t>(longest * 2 * half));
  const float* freq = inv_freq.as<const float>();
  const float scale = rope.scale;
#pragma omp parallel for schedule(static) if (longest * half >= 4096)
  for (int64_t p = 0; p < longest; ++p) {
    float* row = table.data() + p * 2 * half;
    for (int64_t i = 0; i < half; ++i) {
      const float angle = freq[i] * static_cast<float>(p);  // the f32 product of the contract
      row[i] = static_cast<float>(std::cos(static_cast<double>(angle)) * scale);
      row[half + i] = static_cast<float>(sign * std::sin(static_cast<double>(angle)) * scale);
    }
  }
  with_act_type(x.dtype, [&](auto tag) {
    using A = decltype(tag);
    A* xp = x.as<A>();
    const float* tp = table.data();
    const int32_t* pos = position.data();
#pragma omp parallel for schedule(static) if (T * heads * half >= kParallelMinElements)
    for (int64_t t = 0; t < T; ++t) {
      const float* c = tp + pos[t] * 2 * half;
      for (int h = 0; h < heads; ++h) {
        A* head = xp + t * C + int64_t{h} * head_dim;
        if (interleaved)
          rotate_interleaved_head(head, c, c + half, half);
        else
          rotate_half_head(head, c, c + half, half);
      }
    }
  });
}

}  // namespace

void rotary(const TensorView& x, const TensorView& cu_seqlens, const TensorView& inv_freq, const Ops::Rotary& rope) {
  rotate("rotary", x, cu_seqlens, inv_freq, rope, 1.0f);
}

void rotary_backward(const TensorView& dx, const TensorView& cu_seqlens, const TensorView& inv_freq,
                     const Ops::Rotary& rope) {
  rotate("rotary_backward", dx, cu_seqlens, inv_freq, rope, -1.0f);
}

}  // namespace stoke::cpu::fast
