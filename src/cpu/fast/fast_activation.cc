// bias_gelu: x = GELU_erf(x + bias) in place, one token row per iteration,
// threads over tokens, GELU through the vectorisable approximation of
// fast_math.h; beside it its training form and backward (bias_gelu_train,
// bias_gelu_backward) and the activations' tanh_backward and relu_backward:
// element-wise, threads over rows, the GELU's derivative through
// fast_math.h's approximation too.
#include <vector>

#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_math.h"
#include "cpu/fast/fast_ops.h"
#include "backend/op_checks.h"
#include "cpu/fast/fast_backward_common.h"
#include "backend/op_checks_backward.h"

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

// ---- training forms and backwards

namespace {

template <class T, class P>
STOKE_CPU_CLONES void bias_gelu_train_row(T* x, P* pre, const float* bias, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float u = bias ? to_float(x[i]) + bias[i] : to_float(x[i]);  // as bias_gelu computes it
    pre[i] = narrow_one<P>(u);
    x[i] = narrow_one<T>(gelu_erf_approx(u));
  }
}

STOKE_CPU_CLONES void gelu_grad_row(const float* dy, const float* u, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * gelu_erf_grad_approx(u[i]);
}

STOKE_CPU_CLONES void tanh_grad_row(const float* dy, const float* y, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

STOKE_CPU_CLONES void relu_grad_row(const float* dy, const float* y, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

}  // namespace

void bias_gelu_train(const TensorView& x, const TensorView& pre, const TensorView& bias) {
  const RowsShape shape = check_bias_gelu_train(x, pre, bias);
  const int64_t T = shape.T, N = shape.H;  // (plain locals: lambdas and OpenMP may use them)
  if (T == 0 || N == 0) return;
  const std::vector<float> b = widen_vector(bias);
  const float* bp = b.empty() ? nullptr : b.data();
  with_act_type(x.dtype, [&](auto tag) {
    using A = decltype(tag);
    A* xp = x.as<A>();
    auto rows = [&](auto* pp) {
#pragma omp parallel for schedule(static) if (T * N >= kParallelMinElements)
      for (int64_t t = 0; t < T; ++t) bias_gelu_train_row(xp + t * N, pp + t * N, bp, N);
    };
    if (pre.dtype == DType::f32)
      rows(pre.as<float>());
    else
      rows(pre.as<A>());  // (the checks allow only f32 or x's dtype)
  });
}

void bias_gelu_backward(const TensorView& dx, const TensorView& dbias, const TensorView& dy, const TensorView& pre) {
  const RowsShape shape = check_bias_gelu_backward(dx, dbias, dy, pre);
  const int64_t T = shape.T, N = shape.H;
  if (T == 0 || N == 0) return;
  thread_local std::vector<float> dy_buf, u_buf, dx_buf;
  const float* g = f32_input(dy, dy_buf);
  const float* u = f32_input(pre, u_buf);
  float* out = f32_output(dx, dx_buf);
#pragma omp parallel for schedule(static) if (T * N >= kParallelMinElements)
  for (int64_t t = 0; t < T; ++t) gelu_grad_row(g + t * N, u + t * N, out + t * N, N);
  if (!dbias.empty()) column_sums_add(out, T, N, dbias.as<float>());  // the f32 values, before any narrowing
  finish_output(dx, out);
}

namespace {

// dx = dy * f'(y) row by row, for an activation whose derivative is a
// function of its output y (tanh, ReLU).
template <class GradRow>
void backward_from_output(const RowsShape& shape, const TensorView& dx, const TensorView& dy, const TensorView& y,
                          GradRow grad_row) {
  const int64_t R = shape.T, C = shape.H;
  if (R == 0 || C == 0) return;
  thread_local std::vector<float> dy_buf, y_buf, dx_buf;
  const float* g = f32_input(dy, dy_buf);
  const float* yp = f32_input(y, y_buf);
  float* out = f32_output(dx, dx_buf);
#pragma omp parallel for schedule(static) if (R * C >= kParallelMinElements)
  for (int64_t r = 0; r < R; ++r) grad_row(g + r * C, yp + r * C, out + r * C, C);
  finish_output(dx, out);
}

}  // namespace

void tanh_backward(const TensorView& dx, const TensorView& dy, const TensorView& y) {
  backward_from_output(check_tanh_backward(dx, dy, y), dx, dy, y, tanh_grad_row);
}

void relu_backward(const TensorView& dx, const TensorView& dy, const TensorView& y) {
  backward_from_output(check_relu_backward(dx, dy, y), dx, dy, y, relu_grad_row);
}

}  // namespace stoke::cpu::fast
