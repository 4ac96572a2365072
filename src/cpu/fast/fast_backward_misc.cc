// gather_rows_backward (a scatter-add, in row order b = 0, 1, ...: B is the
// batch size, small, so one thread; vectorised over the hidden dimension) and
// pool_backward (threads over sequences; each sequence writes its own rows).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/fast/fast_ops.h"
#include "cpu/fast/fast_backward_common.h"
#include "backend/op_checks_backward.h"

namespace stoke::cpu::fast {

namespace {

// Row r of dh (any activation dtype) plus the float row g.
inline void add_to_row(const TensorView& dh, int64_t r, const float* g, int64_t H, float* tmp) {
  switch (dh.dtype) {
    case DType::f32: {
      float* p = dh.as<float>() + r * H;
#pragma omp simd
      for (int64_t i = 0; i < H; ++i) p[i] += g[i];
      return;
    }
    case DType::bf16:
    case DType::f16:
      std::fill(tmp, tmp + H, 0.0f);
      add_row_any(dh, r, tmp);
      for (int64_t i = 0; i < H; ++i) tmp[i] += g[i];
      convert_n(tmp, DType::f32, static_cast<char*>(dh.data) + static_cast<size_t>(r * H) * dtype_size(dh.dtype),
                dh.dtype, H);
      return;
    default: throw Error(Errc::internal, "gather_rows_backward: not a float tensor");
  }
}

template <class T>
STOKE_CPU_CLONES void pool_backward_sequence(T* dh, const float* g, const float* h, int64_t len, int64_t H,
                                             PoolingMode mode, int64_t* arg) {
  std::fill(dh, dh + len * H, narrow_one<T>(0.0f));
  if (len == 0) return;
  switch (mode) {
    case PoolingMode::cls: narrow(g, dh, H); return;
    case PoolingMode::lasttoken: narrow(g, dh + (len - 1) * H, H); return;
    case PoolingMode::max:
      // arg[i]: the first token holding column i's maximum (h is f32 here).
      std::fill(arg, arg + H, int64_t{0});
      for (int64_t t = 1; t < len; ++t)
        for (int64_t i = 0; i < H; ++i)
          if (h[t * H + i] > h[arg[i] * H + i]) arg[i] = t;
      for (int64_t i = 0; i < H; ++i) dh[arg[i] * H + i] = narrow_one<T>(g[i]);
      return;
    case PoolingMode::mean:
    case PoolingMode::mean_sqrt_len: {
      const float scale =
          mode == PoolingMode::mean ? 1.0f / static_cast<float>(len) : 1.0f / std::sqrt(static_cast<float>(len));
      for (int64_t t = 0; t < len; ++t)
        for (int64_t i = 0; i < H; ++i) dh[t * H + i] = narrow_one<T>(g[i] * scale);
      return;
    }
  }
}

}  // namespace

void gather_rows_backward(const TensorView& dh, const TensorView& dout, const TensorView& rows) {
  const RowsShape shape = check_gather_rows_backward(dh, dout, rows);
  const int64_t B = shape.T, H = shape.H;
  if (B == 0 || H == 0) return;
  thread_local std::vector<float> dout_buf;
  const float* g = f32_input(dout, dout_buf);
  std::vector<float> tmp(static_cast<size_t>(H));
  const int32_t* r = rows.as<const int32_t>();
  for (int64_t b = 0; b < B; ++b) add_to_row(dh, r[b], g + b * H, H, tmp.data());
}

void pool_backward(const TensorView& dh, const TensorView& dout, const TensorView& h, const TensorView& cu_seqlens,
                   PoolingMode mode) {
  const PoolShape shape = check_pool_backward(dh, dout, h, cu_seqlens, mode);
  const int64_t T = shape.T, B = shape.B, H = shape.H;
  if (T == 0 || H == 0) return;
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  thread_local std::vector<float> h_buf;
  const float* hp = mode == PoolingMode::max ? f32_input(h, h_buf) : nullptr;
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

void add(const TensorView& y, const TensorView& x) {
  const int64_t n = check_add(y, x);
  constexpr int64_t kTile = 4096;
  const int64_t tiles = (n + kTile - 1) / kTile;
  const size_t ysz = dtype_size(y.dtype), xsz = dtype_size(x.dtype);
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t at = t * kTile, m = std::min(kTile, n - at);
    if (y.dtype == DType::f32 && x.dtype == DType::f32) {
      float* py = y.as<float>() + at;
      const float* px = x.as<const float>() + at;
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) py[i] += px[i];
      continue;
    }
    // Mixed or low precision: widen both, add in f32, round once.
    float a[kTile], b[kTile];
    char* yp = static_cast<char*>(y.data) + static_cast<size_t>(at) * ysz;
    convert_n(yp, y.dtype, a, DType::f32, m);
    convert_n(static_cast<const char*>(x.data) + static_cast<size_t>(at) * xsz, x.dtype, b, DType::f32, m);
    for (int64_t i = 0; i < m; ++i) a[i] += b[i];
    convert_n(a, DType::f32, yp, y.dtype, m);
  }
}

}  // namespace stoke::cpu::fast
