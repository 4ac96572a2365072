// Shared pieces of the fast training kernels (the training forms and
// backwards in each op family's file).
//
// The training kernels compute in f32 on f32 arrays: an input that is not f32
// is widened once into thread-local scratch (f32 inputs are used in place),
// and an output that is not f32 is computed into scratch and narrowed at the
// end. f32 training, the reference precision, so pays nothing; bf16/f16
// activations pay one conversion pass per tensor.
//
// Determinism: every reduction over tokens (bias, gamma and beta gradients)
// cuts the rows into blocks of a FIXED size (kReduceRows, not "one block per
// thread"), sums each block's rows in order, then adds the blocks' partial
// sums in block order on one thread. Which thread computes a block cannot
// change a bit of the result, so gradients are bitwise reproducible whatever
// the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/fast/fast_common.h"

namespace stoke::cpu::fast {

inline constexpr int64_t kReduceRows = 64;

// t's elements as f32: t itself when it is f32, else widened into buf.
inline const float* f32_input(const TensorView& t, std::vector<float>& buf) {
  if (t.empty()) return nullptr;
  if (t.dtype == DType::f32) return t.as<const float>();
  buf.resize(static_cast<size_t>(t.numel()));
  convert_n(t.data, t.dtype, buf.data(), DType::f32, t.numel());
  return buf.data();
}

// Where to compute t's elements in f32: t itself when it is f32, else buf
// (then finish_output narrows buf into t).
inline float* f32_output(const TensorView& t, std::vector<float>& buf) {
  if (t.dtype == DType::f32) return t.as<float>();
  buf.resize(static_cast<size_t>(t.numel()));
  return buf.data();
}
inline void finish_output(const TensorView& t, const float* computed) {
  if (t.dtype != DType::f32) convert_n(computed, DType::f32, t.data, t.dtype, t.numel());
}

// acc[0:N] += column sums of x[rows, N], deterministically (see above).
void column_sums_add(const float* x, int64_t rows, int64_t N, float* acc);

// acc[0:N] += the sum of the nb partial rows p[nb, N], in block order.
inline void add_partials(const float* p, int64_t nb, int64_t N, float* acc) {
  std::vector<float> sum(static_cast<size_t>(N), 0.0f);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < N; ++i) sum[static_cast<size_t>(i)] += p[b * N + i];
  for (int64_t i = 0; i < N; ++i) acc[i] += sum[static_cast<size_t>(i)];
}

}  // namespace stoke::cpu::fast
