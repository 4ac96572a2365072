// pool and l2_normalize. pool: one sequence per iteration (threads over
// sequences, dynamic because lengths differ), summing token rows into a float
// row (vectorised over the hidden dimension). An empty sequence gives zeros.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_ops.h"
#include "backend/op_checks.h"

namespace stoke::cpu::fast {

namespace {

template <class T>
STOKE_CPU_CLONES void pool_sequence(const T* h, int64_t len, int64_t H, PoolingMode mode, float* out) {
  if (len == 0) {
    std::fill(out, out + H, 0.0f);
    return;
  }
  switch (mode) {
    case PoolingMode::cls: widen(h, out, H); return;
    case PoolingMode::lasttoken: widen(h + (len - 1) * H, out, H); return;
    case PoolingMode::max:
      widen(h, out, H);
      for (int64_t t = 1; t < len; ++t) {
        const T* r = h + t * H;
        for (int64_t i = 0; i < H; ++i) {
          const float v = to_float(r[i]);
          out[i] = out[i] < v ? v : out[i];
        }
      }
      return;
    case PoolingMode::mean:
    case PoolingMode::mean_sqrt_len: {
      widen(h, out, H);
      for (int64_t t = 1; t < len; ++t) widen_add(h + t * H, out, H);
      const float scale =
          mode == PoolingMode::mean ? 1.0f / static_cast<float>(len) : 1.0f / std::sqrt(static_cast<float>(len));
      for (int64_t i = 0; i < H; ++i) out[i] *= scale;
      return;
    }
  }
}

STOKE_CPU_CLONES void normalize_row(float* x, int64_t D) {
  float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < D; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::max(std::sqrt(ss), 1e-12f);
  for (int64_t i = 0; i < D; ++i) x[i] *= inv;
}

}  // namespace

void pool(const TensorView& out, const TensorView& h, const TensorView& cu_seqlens, PoolingMode mode) {
  const PoolShape shape = check_pool(out, h, cu_seqlens);
  const int64_t T = shape.T, B = shape.B, H = shape.H;  // (plain locals: lambdas may capture them)
  if (B == 0 || H == 0) return;
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  float* op = out.as<float>();
  with_act_type(h.dtype, [&](auto tag) {
    using A = decltype(tag);
    const A* hp = h.as<const A>();
#pragma omp parallel for schedule(dynamic) if (T * H >= kParallelMinElements && B > 1)
    for (int64_t b = 0; b < B; ++b)
      pool_sequence(hp + int64_t{cu[b]} * H, int64_t{cu[b + 1]} - cu[b], H, mode, op + b * H);
  });
}

void l2_normalize(const TensorView& x) {
  const RowsShape shape = check_l2_normalize(x);
  const int64_t B = shape.T, D = shape.H;
  float* xp = x.as<float>();
#pragma omp parallel for schedule(static) if (B * D >= kParallelMinElements)
  for (int64_t b = 0; b < B; ++b) normalize_row(xp + b * D, D);
}

}  // namespace stoke::cpu::fast
