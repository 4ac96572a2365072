// The row of every LayerNorm forward of the fast CPU kernels: the inference
// ops (fast_layernorm.cc) and the training forwards that also keep mean and
// rstd (fast_backward_layernorm.cc), which so write the same out bit for bit.
//
// The row arrives as its input summed in double (x + residual, or word +
// position + type): f32 values add exactly there, or nearly (their sum needs
// 24 bits plus the difference of their exponents, double has 53). The
// statistics stay in double, two-pass (the mean, then the centred sum of
// squares), and so does (s - mean) rstd gamma + beta until its one rounding
// to the output type. Why not f32: a trained encoder's rows can have means in
// the hundreds and spreads of hundredths (tests/ops, "activations of trained
// models"). In f32 the rounded sum and the rounded mean are each off by up to
// half an ulp of the mean, a shift of every centred value that the
// normalisation then divides by the spread: 2e-3 relative at mean 300 and
// spread 0.01, where the double row is within a rounding of exact. The cost
// is twice the vector work of an f32 row on an op that waits on memory
// (docs/performance.md measures the forward before and after).
// Every helper here is inlined (always) into the per-ISA clones of the
// kernel files' row functions, so both files run the same operations in the
// same order on every CPU.
#pragma once

#include <cmath>
#include <cstdint>

#include "cpu/fast/fast_common.h"

namespace stoke::cpu::fast {

// Normalises the summed row s[0:H] into out; mean and rstd (f32, may be null)
// receive the row's statistics rounded once.
template <class T>
[[gnu::always_inline]] inline void layernorm_row(const double* s, T* out, int64_t H, const float* gamma,
                                                 const float* beta, float eps, float* mean_out, float* rstd_out) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < H; ++i) sum += s[i];
  const double mean = sum / static_cast<double>(H);
  double ss = 0.0;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < H; ++i) ss += (s[i] - mean) * (s[i] - mean);
  const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(H) + static_cast<double>(eps));
#pragma omp simd
  for (int64_t i = 0; i < H; ++i) out[i] = narrow_one<T>(static_cast<float>((s[i] - mean) * rstd * gamma[i] + beta[i]));
  if (mean_out) *mean_out = static_cast<float>(mean);
  if (rstd_out) *rstd_out = static_cast<float>(rstd);
}

// dst[0:n] = (or +=, when add) src[0:n] widened to double.
template <class T>
[[gnu::always_inline]] inline void widen_into_wide(const T* src, double* dst, int64_t n, bool add) {
  if (add)
    for (int64_t i = 0; i < n; ++i) dst[i] += static_cast<double>(to_float(src[i]));
  else
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<double>(to_float(src[i]));
}

// Row `row` of a 2-D float tensor of any float dtype into a double row.
[[gnu::always_inline]] inline void row_into_wide(const TensorView& t, int64_t row, double* dst, bool add) {
  const int64_t n = t.dim(1);
  switch (t.dtype) {
    case DType::f32:
      widen_into_wide(t.as<const float>() + row * n, dst, n, add);
      return;
    case DType::bf16:
      widen_into_wide(t.as<const bf16>() + row * n, dst, n, add);
      return;
    case DType::f16:
      widen_into_wide(t.as<const f16>() + row * n, dst, n, add);
      return;
    default:
      throw Error(Errc::internal, "fast kernels: not a float tensor");
  }
}

// The embedding LayerNorm's input row of token t in double: word[ids[t]] +
// pos[positions[t]] + type[type_ids[t] or 0] (no type table: no term).
[[gnu::always_inline]] inline void embedding_row_wide(double* row, int64_t t, int64_t H, const int32_t* id,
                                                      const int32_t* ps, const int32_t* ty, const TensorView& word,
                                                      const TensorView& pos, const TensorView& type) {
  (void)H;  // every table is H wide (the op's checks)
  row_into_wide(word, id[t], row, false);
  row_into_wide(pos, ps[t], row, true);
  if (!type.empty()) row_into_wide(type, ty ? ty[t] : 0, row, true);
}

// The residual LayerNorm's input row in double: x + residual (no residual: x).
template <class T>
[[gnu::always_inline]] inline void residual_row_wide(double* row, const T* x, const T* res, int64_t H) {
  if (res)
    for (int64_t i = 0; i < H; ++i)
      row[i] = static_cast<double>(to_float(x[i])) + static_cast<double>(to_float(res[i]));
  else
    for (int64_t i = 0; i < H; ++i) row[i] = static_cast<double>(to_float(x[i]));
}

}  // namespace stoke::cpu::fast
