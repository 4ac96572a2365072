// bias_gelu: x = GELU_erf(x + bias) in place, one token row per iteration,
// threads over tokens, GELU through the vectorisable approximation of
// fast_math.h.
#include <vector>

#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_math.h"
#include "cpu/fast/fast_ops.h"
#include "backend/op_checks.h"

namespace stoke::cpu::fast {

namespace {

template <class T>
STOKE_CPU_CLONES void bias_gelu_row(T* x, const float* bias, int64_t n) {
  if (bias) {
    for (int64_t i = 0; i < n; ++i) x[i] = narrow_one<T>(gelu_erf_approx(to_float(x[i]) + bias[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = narrow_one<T>(gelu_erf_approx(to_float(x[i])));
  }
}

template <class T>
void bias_gelu_t(const TensorView& x, const std::vector<float>& bias, int64_t T_, int64_t N) {
  T* xp = x.as<T>();
  const float* b = bias.empty() ? nullptr : bias.data();
#pragma omp parallel for schedule(static) if (T_ * N >= kParallelMinElements)
  for (int64_t t = 0; t < T_; ++t) bias_gelu_row(xp + t * N, b, N);
}

}  // namespace

void bias_gelu(const TensorView& x, const TensorView& bias) {
  const auto shape = check_bias_gelu(x, bias);
  if (shape.T == 0 || shape.H == 0) return;
  const std::vector<float> b = widen_vector(bias);
  with_act_type(x.dtype, [&](auto tag) { bias_gelu_t<decltype(tag)>(x, b, shape.T, shape.H); });
}

}  // namespace stoke::cpu::fast
