// linear and bias_gelu: the GEMM with its epilogue (products summed in double, k ascending; ref_products.h),
// and their training forms and backwards: linear_backward, bias_gelu_train,
// bias_gelu_backward, and the activations' tanh_backward and relu_backward.
// Plain loops in double; a parameter gradient is read, the whole sum over
// tokens added to it in double, and stored once (+=).
#include <cmath>
#include <vector>

#include "backend/op_checks.h"
#include "cpu/ref/ref_ops.h"
#include "cpu/ref/ref_products.h"
#include "backend/op_checks_backward.h"

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

// ---- training forms and backwards

namespace {

// GELU_erf'(u) = Phi(u) + u phi(u): the product rule on u Phi(u).
double gelu_erf_grad(double u) {
  const double Phi = 0.5 * std::erfc(-u / std::sqrt(2.0));
  const double phi = std::exp(-0.5 * u * u) / 2.5066282746310002;  // sqrt(2 pi)
  return Phi + u * phi;
}

}  // namespace

void linear_backward(const TensorView& da, const TensorView& dw, const TensorView& db, const TensorView& dy,
                     const TensorView& a, const TensorView& w, Accumulate da_acc) {
  const auto [M, N, K] = check_linear_backward(da, dw, db, dy, a, w, da_acc);
  auto widen = [](const TensorView& t, int64_t n) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = load(t, i);
    return v;
  };
  const std::vector<double> g = widen(dy, M * N);  // dy [M, N]
  if (!da.empty()) {  // da[m,k] (+)= sum_n dy[m,n] w[n,k], n ascending
    const std::vector<double> wd = widen(w, N * K);
    std::vector<double> sums(static_cast<size_t>(M * K), 0.0);
    accumulate_products(sums.data(), g.data(), wd.data(), M, N, K);
    for (int64_t i = 0; i < M * K; ++i) {
      const double acc = sums[static_cast<size_t>(i)];
      if (da_acc == Accumulate::yes)  // f32 da: the sum rounded as stored, then the add op's f32 add
        store(da, i, static_cast<double>(static_cast<float>(load(da, i)) + static_cast<float>(acc)));
      else
        store(da, i, acc);
    }
  }
  if (!dw.empty()) {  // dw[n,k] += sum_m dy[m,n] a[m,k], m ascending
    const std::vector<double> x = widen(a, M * K);
    std::vector<double> gt(static_cast<size_t>(N * M));  // dy^T [N, M]
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) gt[static_cast<size_t>(n * M + m)] = g[static_cast<size_t>(m * N + n)];
    std::vector<double> sums(static_cast<size_t>(N * K), 0.0);
    accumulate_products(sums.data(), gt.data(), x.data(), N, M, K);
    for (int64_t i = 0; i < N * K; ++i) store(dw, i, load(dw, i) + sums[static_cast<size_t>(i)]);
  }
  if (!db.empty())  // db[n] += sum_m dy[m,n]
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0.0;
      for (int64_t m = 0; m < M; ++m) acc += g[static_cast<size_t>(m * N + n)];
      store(db, n, load(db, n) + acc);
    }
}

void bias_gelu_train(const TensorView& x, const TensorView& pre, const TensorView& bias) {
  const auto [T, N] = check_bias_gelu_train(x, pre, bias);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      const double v = load(x, t * N + n) + (bias.empty() ? 0.0 : load(bias, n));
      store(pre, t * N + n, v);
      store(x, t * N + n, gelu_erf(v));  // exactly what bias_gelu stores
    }
}

void bias_gelu_backward(const TensorView& dx, const TensorView& dbias, const TensorView& dy, const TensorView& pre) {
  const auto [T, N] = check_bias_gelu_backward(dx, dbias, dy, pre);
  std::vector<double> sums(static_cast<size_t>(N), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      const double g = load(dy, t * N + n) * gelu_erf_grad(load(pre, t * N + n));
      sums[static_cast<size_t>(n)] += g;
      store(dx, t * N + n, g);  // after the load of dy: dx may be dy
    }
  if (!dbias.empty())
    for (int64_t n = 0; n < N; ++n) store(dbias, n, load(dbias, n) + sums[static_cast<size_t>(n)]);
}

void tanh_backward(const TensorView& dx, const TensorView& dy, const TensorView& y) {
  const auto [R, C] = check_tanh_backward(dx, dy, y);
  for (int64_t i = 0; i < R * C; ++i) {
    const double v = load(y, i);
    store(dx, i, load(dy, i) * (1.0 - v * v));
  }
}

void relu_backward(const TensorView& dx, const TensorView& dy, const TensorView& y) {
  const auto [R, C] = check_relu_backward(dx, dy, y);
  for (int64_t i = 0; i < R * C; ++i) store(dx, i, load(y, i) > 0 ? load(dy, i) : 0.0);
}

}  // namespace stoke::cpu::ref
