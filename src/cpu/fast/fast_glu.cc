// glu and glu_backward: element-wise over token rows (threads over rows), in
// f32 through the vectorisable exp and GELU of fast_math.h.
#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_math.h"
#include "cpu/fast/fast_ops.h"
#include "backend/glu_checks.h"

namespace stoke::cpu::fast {

namespace {

using Act = Ops::Glu::Act;

inline float sigmoid_approx(float v) { return 1.0f / (1.0f + exp_approx(-v)); }

template <class T>
STOKE_CPU_CLONES void glu_row(const T* g, const T* u, T* out, int64_t n, Act act) {
  if (act == Act::silu) {
    for (int64_t i = 0; i < n; ++i) {
      const float gv = to_float(g[i]);
      out[i] = narrow_one<T>(gv * sigmoid_approx(gv) * to_float(u[i]));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = narrow_one<T>(gelu_erf_approx(to_float(g[i])) * to_float(u[i]));
  }
}

// dg and du may be g and u themselves (dx aliasing x): each pair is read first.
template <class T, class O, class D>
STOKE_CPU_CLONES void glu_backward_row(const T* g, const T* u, const O* dout, D* dg, D* du, int64_t n, Act act) {
  for (int64_t i = 0; i < n; ++i) {
    const float gv = to_float(g[i]), uv = to_float(u[i]), d = to_float(dout[i]);
    float a, grad;
    if (act == Act::silu) {
      const float s = sigmoid_approx(gv);
      a = gv * s;
      grad = s * (1.0f + gv * (1.0f - s));
    } else {
      a = gelu_erf_approx(gv);
      grad = gelu_erf_grad_approx(gv);
    }
    dg[i] = narrow_one<D>(d * uv * grad);
    du[i] = narrow_one<D>(d * a);
  }
}

}  // namespace

void glu(const TensorView& out, const TensorView& x, const Ops::Glu& glu) {
  const RowsShape shape = check_glu(out, x, glu);
  const int64_t T = shape.T, N = shape.H;
  const int64_t g_off = glu.act_on_second ? N : 0, u_off = glu.act_on_second ? 0 : N;
  const Act act = glu.act;
  if (T == 0 || N == 0) return;
  with_act_type(x.dtype, [&](auto tag) {
    using A = decltype(tag);
    const A* xp = x.as<const A>();
    A* op = out.as<A>();
#pragma omp parallel for schedule(static) if (T * N >= kParallelMinElements)
    for (int64_t t = 0; t < T; ++t) glu_row(xp + t * 2 * N + g_off, xp + t * 2 * N + u_off, op + t * N, N, act);
  });
}

void glu_backward(const TensorView& dx, const TensorView& dout, const TensorView& x, const Ops::Glu& glu) {
  const RowsShape shape = check_glu_backward(dx, dout, x, glu);
  const int64_t T = shape.T, N = shape.H;
  const int64_t g_off = glu.act_on_second ? N : 0, u_off = glu.act_on_second ? 0 : N;
  const Act act = glu.act;
  if (T == 0 || N == 0) return;
  with_act_type(x.dtype, [&](auto tag) {
    using A = decltype(tag);
    const A* xp = x.as<const A>();
    auto rows = [&](const auto* dp, auto* dxp) {
#pragma omp parallel for schedule(static) if (T * N >= kParallelMinElements)
      for (int64_t t = 0; t < T; ++t)
        glu_backward_row(xp + t * 2 * N + g_off, xp + t * 2 * N + u_off, dp + t * N, dxp + t * 2 * N + g_off,
                         dxp + t * 2 * N + u_off, N, act);
    };
    // (the checks allow only f32 or x's dtype for dout and dx)
    auto with_dx = [&](const auto* dp) {
      if (dx.dtype == DType::f32)
        rows(dp, dx.as<float>());
      else
        rows(dp, dx.as<A>());
    };
    if (dout.dtype == DType::f32)
      with_dx(dout.as<const float>());
    else
      with_dx(dout.as<const A>());
  });
}

}  // namespace stoke::cpu::fast
