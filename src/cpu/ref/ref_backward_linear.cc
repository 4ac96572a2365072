// Reference backward of linear and of its activations (GELU-erf, tanh), plus
// bias_gelu_train. Plain loops in double; a parameter gradient is read, the
// whole sum over tokens added to it in double, and stored once (+=).
#include <cmath>
#include <vector>

#include "cpu/ref/op_checks_backward.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu::ref {

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
  auto at = [](const std::vector<double>& v, int64_t i) { return v[static_cast<size_t>(i)]; };
  std::vector<double> g(static_cast<size_t>(M * N)), x(static_cast<size_t>(M * K)), wd(static_cast<size_t>(N * K));
  for (int64_t i = 0; i < M * N; ++i) g[static_cast<size_t>(i)] = load(dy, i);
  for (int64_t i = 0; i < M * K; ++i) x[static_cast<size_t>(i)] = load(a, i);
  for (int64_t i = 0; i < N * K; ++i) wd[static_cast<size_t>(i)] = load(w, i);
  if (!da.empty())  // da[m,k] (+)= sum_n dy[m,n] w[n,k]
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) {
        double acc = 0.0;
        for (int64_t n = 0; n < N; ++n) acc += at(g, m * N + n) * at(wd, n * K + k);
        if (da_acc == Accumulate::yes)  // f32 da: the sum rounded as stored, then the add op's f32 add
          store(da, m * K + k, static_cast<double>(static_cast<float>(load(da, m * K + k)) + static_cast<float>(acc)));
        else
          store(da, m * K + k, acc);
      }
  if (!dw.empty())  // dw[n,k] += sum_m dy[m,n] a[m,k]
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        double acc = 0.0;
        for (int64_t m = 0; m < M; ++m) acc += at(g, m * N + n) * at(x, m * K + k);
        store(dw, n * K + k, load(dw, n * K + k) + acc);
      }
  if (!db.empty())  // db[n] += sum_m dy[m,n]
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0.0;
      for (int64_t m = 0; m < M; ++m) acc += at(g, m * N + n);
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
