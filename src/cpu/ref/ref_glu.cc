// glu and glu_backward: act(g) * u and its two partial derivatives, written
// out plainly in double.
#include <cmath>

#include "backend/glu_checks.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu::ref {

namespace {

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

double gate(double g, Ops::Glu::Act act) {
  return act == Ops::Glu::Act::silu ? g * sigmoid(g) : gelu_erf(g);
}

// d act(g) / dg: silu' = s (1 + g (1 - s)); GELU_erf' = Phi(g) + g phi(g).
double gate_grad(double g, Ops::Glu::Act act) {
  if (act == Ops::Glu::Act::silu) {
    const double s = sigmoid(g);
    return s * (1.0 + g * (1.0 - s));
  }
  const double pi = 3.14159265358979323846;
  return 0.5 * (1.0 + std::erf(g / std::sqrt(2.0))) + g * std::exp(-0.5 * g * g) / std::sqrt(2.0 * pi);
}

}  // namespace

void glu(const TensorView& out, const TensorView& x, const Ops::Glu& glu) {
  const auto [T, N] = check_glu(out, x, glu);
  const int64_t g_off = glu.act_on_second ? N : 0, u_off = glu.act_on_second ? 0 : N;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n)
      store(out, t * N + n, gate(load(x, t * 2 * N + g_off + n), glu.act) * load(x, t * 2 * N + u_off + n));
}

void glu_backward(const TensorView& dx, const TensorView& dout, const TensorView& x, const Ops::Glu& glu) {
  const auto [T, N] = check_glu_backward(dx, dout, x, glu);
  const int64_t g_off = glu.act_on_second ? N : 0, u_off = glu.act_on_second ? 0 : N;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t gi = t * 2 * N + g_off + n, ui = t * 2 * N + u_off + n;
      const double g = load(x, gi), u = load(x, ui), d = load(dout, t * N + n);
      store(dx, gi, d * u * gate_grad(g, glu.act));
      store(dx, ui, d * gate(g, glu.act));
    }
}

}  // namespace stoke::cpu::ref
