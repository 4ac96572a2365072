// linear and bias_gelu: the GEMM with its epilogue, one dot product at a time.
#include <vector>

#include "cpu/ref/op_checks.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu::ref {

void linear(const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias, Activation act) {
  const auto [M, N, K] = check_linear(out, a, w, bias);
  std::vector<double> wd(static_cast<size_t>(N * K));  // w [N, K] widened once
  for (int64_t i = 0; i < N * K; ++i) wd[static_cast<size_t>(i)] = load(w, i);
  std::vector<double> row(static_cast<size_t>(K));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) row[static_cast<size_t>(k)] = load(a, m * K + k);
    for (int64_t n = 0; n < N; ++n) {
      double acc = bias.empty() ? 0.0 : load(bias, n);
      const double* wn = wd.data() + n * K;
      for (int64_t k = 0; k < K; ++k) acc += row[static_cast<size_t>(k)] * wn[k];
      store(out, m * N + n, activate(acc, act));
    }
  }
}

void bias_gelu(const TensorView& x, const TensorView& bias) {
  const auto [T, N] = check_bias_gelu(x, bias);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      const double v = load(x, t * N + n) + (bias.empty() ? 0.0 : load(bias, n));
      store(x, t * N + n, gelu_erf(v));
    }
}

}  // namespace stoke::cpu::ref
