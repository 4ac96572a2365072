// linear and bias_gelu: the GEMM with its epilogue, one dot product at a time.
#include <vector>

#include "cpu/ref/op_checks.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu::ref {

void linear(const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias, Activation act,
            Accumulate acc) {
  const auto [M, N, K] = check_linear(out, a, w, bias, act, acc);
  std::vector<double> wd(static_cast<size_t>(N * K));  // w [N, K] widened once
  for (int64_t i = 0; i < N * K; ++i) wd[static_cast<size_t>(i)] = load(w, i);
  std::vector<double> row(static_cast<size_t>(K));
  const bool add = acc == Accumulate::yes;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) row[static_cast<size_t>(k)] = load(a, m * K + k);
    for (int64_t n = 0; n < N; ++n) {
      double sum = bias.empty() ? 0.0 : load(bias, n);
      const double* wn = wd.data() + n * K;
      for (int64_t k = 0; k < K; ++k) sum += row[static_cast<size_t>(k)] * wn[k];
      if (add) {
        // The product rounded to f32 as a plain linear stores it, then the f32
        // add of the add op: bit for bit the unfolded linear + add.
        const float y = static_cast<float>(activate(sum, act));
        store(out, m * N + n, static_cast<double>(static_cast<float>(load(out, m * N + n)) + y));
      } else {
        store(out, m * N + n, activate(sum, act));
      }
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
