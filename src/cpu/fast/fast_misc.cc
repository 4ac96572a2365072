// Data movement: gather_rows, slice_columns, convert. Same-dtype copies are
// memcpy; dtype changes go through float with core/half.h's rounding, typed
// once per call. gather_rows_backward: a scatter-add, in row order b = 0, 1,
// ... (B is the batch size, small, so one thread; vectorised over the hidden
// dimension). add: the sum of two gradient paths, in f32, rounded once.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_ops.h"
#include "backend/op_checks.h"
#include "cpu/fast/fast_backward_common.h"
#include "backend/op_checks_backward.h"

namespace stoke::cpu::fast {

namespace {

template <class From, class To>
STOKE_CPU_CLONES void convert_span(const From* src, To* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = narrow_one<To>(to_float(src[i]));
}

// Copies (and converts) `count` runs of n elements: run r reads src + src_off(r)
// and writes dst + r * n.
template <class Offsets>
void copy_runs(const void* src, DType st, void* dst, DType dt, int64_t count, int64_t n, Offsets src_off) {
  if (count == 0 || n == 0) return;
  const size_t ss = dtype_size(st), ds = dtype_size(dt);
  auto* s = static_cast<const char*>(src);
  auto* d = static_cast<char*>(dst);
  if (st == dt) {
    for (int64_t r = 0; r < count; ++r)
      std::memcpy(d + static_cast<size_t>(r * n) * ds, s + static_cast<size_t>(src_off(r)) * ss,
                  static_cast<size_t>(n) * ss);
    return;
  }
  with_act_type(st, [&](auto from) {
    with_act_type(dt, [&](auto to) {
      using F = decltype(from);
      using O = decltype(to);
#pragma omp parallel for schedule(static) if (count * n >= kParallelMinElements && count > 1)
      for (int64_t r = 0; r < count; ++r)
        convert_span(reinterpret_cast<const F*>(s) + src_off(r), reinterpret_cast<O*>(d) + r * n, n);
    });
  });
}

}  // namespace

void convert_n(const void* src, DType src_type, void* dst, DType dst_type, int64_t n) {
  if (n == 0 || src == dst) return;  // identical same-dtype view (the checks refuse other overlaps)
  // Blocks of 4096 elements so large conversions spread over the threads.
  constexpr int64_t kBlock = 4096;
  const int64_t full = n / kBlock, tail = n - full * kBlock;
  copy_runs(src, src_type, dst, dst_type, full, kBlock, [](int64_t r) { return r * kBlock; });
  if (tail)
    copy_runs(src, src_type, static_cast<char*>(dst) + static_cast<size_t>(full * kBlock) * dtype_size(dst_type),
              dst_type, 1, tail, [&](int64_t) { return full * kBlock; });
}

void gather_rows(const TensorView& out, const TensorView& h, const TensorView& rows) {
  const RowsShape shape = check_gather_rows(out, h, rows);
  const int64_t B = shape.T, H = shape.H;  // (plain locals: lambdas may capture them)
  const int32_t* r = rows.as<const int32_t>();
  copy_runs(h.data, h.dtype, out.data, out.dtype, B, H, [&](int64_t b) { return int64_t{r[b]} * H; });
}

void slice_columns(const TensorView& out, const TensorView& in) {
  const RowsShape shape = check_slice_columns(out, in);
  const int64_t B = shape.T, D = shape.H;
  const int64_t Din = in.dim(1);
  copy_runs(in.data, in.dtype, out.data, out.dtype, B, D, [&](int64_t b) { return b * Din; });
}

void convert(const TensorView& out, const TensorView& in) {
  const int64_t n = check_convert(out, in);
  convert_n(in.data, in.dtype, out.data, out.dtype, n);
}

// ---- backward

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
