// pool and l2_normalize (its norm in double, see normalize_row). pool: one sequence per iteration (threads over
// sequences, dynamic because lengths differ), summing token rows into a
// double row (vectorised over the hidden dimension), rounded once at the end.
// Why double: a text with a run of one token sums near-equal rows hundreds of
// times, and the roundings of an f32 running sum then line up instead of
// cancelling (1,500 equal rows: 200 u, tests/ops "activations of trained
// models"); f32 values add exactly in double, and a sequence of fewer than
// 2^29 rows keeps the sum within a rounding. An empty sequence gives zeros.
// pool_backward: threads over sequences; each sequence writes its own rows.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_ops.h"
#include "backend/op_checks.h"
#include "cpu/fast/fast_backward_common.h"
#include "backend/op_checks_backward.h"

namespace stoke::cpu::fast {

namespace {

// acc: H doubles of scratch.
template <class T>
STOKE_CPU_CLONES void pool_sequence(const T* h, int64_t len, int64_t H, Pooling mode, float* out, double* acc) {
  if (len == 0) {
    std::fill(out, out + H, 0.0f);
    return;
  }
  switch (mode) {
    case Pooling::cls: widen(h, out, H); return;
    case Pooling::lasttoken: widen(h + (len - 1) * H, out, H); return;
    case Pooling::max:
      widen(h, out, H);
      for (int64_t t = 1; t < len; ++t) {
        const T* r = h + t * H;
        for (int64_t i = 0; i < H; ++i) {
          const float v = to_float(r[i]);
          out[i] = out[i] < v ? v : out[i];
        }
      }
      return;
    case Pooling::mean:
    case Pooling::mean_sqrt_len: {
      for (int64_t i = 0; i < H; ++i) acc[i] = 0.0;
      for (int64_t t = 0; t < len; ++t) {
        const T* r = h + t * H;
#pragma omp simd
        for (int64_t i = 0; i < H; ++i) acc[i] += static_cast<double>(to_float(r[i]));
      }
      const double n = static_cast<double>(len);
      const double divisor = mode == Pooling::mean ? n : std::sqrt(n);
      for (int64_t i = 0; i < H; ++i) out[i] = static_cast<float>(acc[i] / divisor);
      return;
    }
  }
}

// The norm in double and one rounding per element: an f32 sum of squares,
// its square root, the reciprocal and the product round four times, a common
// scale error of ~2 u on every element of the vector (measured against a
// float64 run of a model whose vectors have a few large components: twice
// torch's error there, which rounds twice).
STOKE_CPU_CLONES void normalize_row(float* x, int64_t D) {
  double ss = 0.0;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < D; ++i) ss += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  const double norm = std::max(std::sqrt(ss), 1e-12);
  for (int64_t i = 0; i < D; ++i) x[i] = static_cast<float>(static_cast<double>(x[i]) / norm);
}

}  // namespace

void pool(const TensorView& out, const TensorView& h, const TensorView& cu_seqlens, Pooling mode) {
  const PoolShape shape = check_pool(out, h, cu_seqlens);
  const int64_t T = shape.T, B = shape.B, H = shape.H;  // (plain locals: lambdas may capture them)
  if (B == 0 || H == 0) return;
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  float* op = out.as<float>();
  with_act_type(h.dtype, [&](auto tag) {
    using A = decltype(tag);
    const A* hp = h.as<const A>();
#pragma omp parallel if (T * H >= kParallelMinElements && B > 1)
    {
      std::vector<double> acc(static_cast<size_t>(H));
#pragma omp for schedule(dynamic)
      for (int64_t b = 0; b < B; ++b)
        pool_sequence(hp + int64_t{cu[b]} * H, int64_t{cu[b + 1]} - cu[b], H, mode, op + b * H, acc.data());
    }
  });
}

void l2_normalize(const TensorView& x) {
  const RowsShape shape = check_l2_normalize(x);
  const int64_t B = shape.T, D = shape.H;
  float* xp = x.as<float>();
#pragma omp parallel for schedule(static) if (B * D >= kParallelMinElements)
  for (int64_t b = 0; b < B; ++b) normalize_row(xp + b * D, D);
}

// ---- backward

namespace {

template <class T>
STOKE_CPU_CLONES void pool_backward_sequence(T* dh, const float* g, const float* h, int64_t len, int64_t H,
                                             Pooling mode, int64_t* arg) {
  std::fill(dh, dh + len * H, narrow_one<T>(0.0f));
  if (len == 0) return;
  switch (mode) {
    case Pooling::cls: narrow(g, dh, H); return;
    case Pooling::lasttoken: narrow(g, dh + (len - 1) * H, H); return;
    case Pooling::max:
      // arg[i]: the first token holding column i's maximum (h is f32 here).
      std::fill(arg, arg + H, int64_t{0});
      for (int64_t t = 1; t < len; ++t)
        for (int64_t i = 0; i < H; ++i)
          if (h[t * H + i] > h[arg[i] * H + i]) arg[i] = t;
      for (int64_t i = 0; i < H; ++i) dh[arg[i] * H + i] = narrow_one<T>(g[i]);
      return;
    case Pooling::mean:
    case Pooling::mean_sqrt_len: {
      const float scale =
          mode == Pooling::mean ? 1.0f / static_cast<float>(len) : 1.0f / std::sqrt(static_cast<float>(len));
      for (int64_t t = 0; t < len; ++t)
        for (int64_t i = 0; i < H; ++i) dh[t * H + i] = narrow_one<T>(g[i] * scale);
      return;
    }
  }
}

}  // namespace

void pool_backward(const TensorView& dh, const TensorView& dout, const TensorView& h, const TensorView& cu_seqlens,
                   Pooling mode) {
  const PoolShape shape = check_pool_backward(dh, dout, h, cu_seqlens, mode);
  const int64_t T = shape.T, B = shape.B, H = shape.H;
  if (T == 0 || H == 0) return;
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  thread_local std::vector<float> h_buf;
  const float* hp = mode == Pooling::max ? f32_input(h, h_buf) : nullptr;
  const float* g = dout.as<const float>();
  with_act_type(dh.dtype, [&](auto tag) {
    using A = decltype(tag);
    A* d = dh.as<A>();
#pragma omp parallel if (T * H >= kParallelMinElements && B > 1)
    {
      std::vector<int64_t> arg(static_cast<size_t>(H));
#pragma omp for schedule(dynamic)
      for (int64_t b = 0; b < B; ++b) {
        const int64_t first = cu[b];
        pool_backward_sequence(d + first * H, g + b * H, hp ? hp + first * H : nullptr, int64_t{cu[b + 1]} - first, H,
                               mode, arg.data());
      }
    }
  });
}

}  // namespace stoke::cpu::fast
