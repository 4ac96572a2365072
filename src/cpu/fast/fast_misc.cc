// Data movement: gather_rows, slice_columns, convert. Same-dtype copies are
// memcpy; dtype changes go through float with core/half.h's rounding, typed
// once per call.
#include <cstring>

#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_ops.h"
#include "backend/op_checks.h"

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

}  // namespace stoke::cpu::fast
