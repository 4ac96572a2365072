// linear and bias_gelu: the GEMM with its epilogue (products summed in double, k ascending; ref_products.h).
#include <vector>

#include "backend/op_checks.h"
#include "cpu/ref/ref_ops.h"
#include "cpu/ref/ref_products.h"

namespace stoke::cpu::ref {

void linear(const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias, Activation act,
            Accumulate acc) {
  const auto [M, N, K] = check_linear(out, a, w, bias, act, acc);
  // sum[m,n] = bias[n] + a[m,0] w[n,0] + a[m,1] w[n,1] + ..., k ascending
  std::vector<double> x(static_cast<size_t>(M * K)), wt(static_cast<size_t>(K * N)), sums(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < M * K; ++i) x[static_cast<size_t>(i)] = load(a, i);
  for (int64_t n = 0; n < N; ++n)  // w [N, K] widened and transposed once: w^T [K, N]
    for (int64_t k = 0; k < K; ++k) wt[static_cast<size_t>(k * N + n)] = load(w, n * K + k);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) sums[static_cast<size_t>(m * N + n)] = bias.empty() ? 0.0 : load(bias, n);
  accumulate_products(sums.data(), x.data(), wt.data(), M, K, N);
  const bool add = acc == Accumulate::yes;
  for (int64_t i = 0; i < M * N; ++i) {
    const double sum = sums[static_cast<size_t>(i)];
    if (add) {
      // The product rounded to f32 as a plain linear stores it, then the f32
      // add of the add op: bit for bit the unfolded linear + add.
      const float y = static_cast<float>(activate(sum, act));
      store(out, i, static_cast<double>(static_cast<float>(load(out, i)) + y));
    } else {
      store(out, i, activate(sum, act));
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
