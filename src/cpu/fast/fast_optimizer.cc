// The optimizer step: sum_squares (gradient norm), clip_scale (torch's
// clip_grad_norm_ coefficient, read by adamw from memory), adamw. (The loss
// scaler's ops, which adamw reads: fast_loss_scale.cc.)
//
// adamw does torch.optim.AdamW's CPU arithmetic (torch/optim/adam.py,
// _single_tensor_adam with decoupled weight decay) in f32, operation for
// operation, with the coefficients torch forms in Python doubles rounded to
// f32 once:
//   p = p * f32(1 - lr * wd)                  param.mul_(1 - lr * wd)
//   m = m + f32(1 - beta1) * (g - m)          exp_avg.lerp_(grad, 1 - beta1)
//   v = v * f32(beta2) + f32(1 - beta2) * g * g   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2)
//   d = sqrt(v) / f32(sqrt(1 - beta2^t)) + f32(eps)
//   p = p + f32(-lr / (1 - beta1^t)) * m / d  param.addcdiv_(exp_avg, denom, -step_size)
// (the build uses -ffp-contract=off, ISO C++: no multiply-add is fused behind
// our back), so the result tracks torch to an ulp or so per step.
// sum_squares sums fixed chunks in double and adds the chunk sums in order:
// the same total for any thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_ops.h"
#include "cpu/ref/ref_optimizer.h"
#include "backend/train_checks.h"

namespace stoke::cpu::fast {

namespace {

constexpr int64_t kChunk = 1 << 14;

template <class T>
STOKE_CPU_CLONES double sum_squares_span(const T* x, int64_t n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) {
    const double xi = to_float(x[i]);
    s += xi * xi;
  }
  return s;
}

template <class T>
double sum_squares_t(const T* x, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t first = c * kChunk;
    part[static_cast<size_t>(c)] = sum_squares_span(x + first, n - first < kChunk ? n - first : kChunk);
  }
  double s = 0.0;
  for (double v : part) s += v;
  return s;
}

struct AdamWCoef {
  float grad_scale, decay, w1, beta2, w2, bc2_sqrt, eps, neg_step;
};

STOKE_CPU_CLONES void adamw_span(float* p, const float* g, float* m, float* v, int64_t n, float decay,
                                 const AdamWCoef& k) {
  const float s = k.grad_scale, w1 = k.w1, b2 = k.beta2, w2 = k.w2, bc2 = k.bc2_sqrt, eps = k.eps,
              step = k.neg_step;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * s;
    const float pi = p[i] * decay;  // decay is exactly 1 where no decay applies: p * 1 = p
    const float mi = m[i] + w1 * (gi - m[i]);
    float vi = v[i] * b2;
    vi = vi + w2 * gi * gi;
    const float denom = std::sqrt(vi) / bc2 + eps;
    p[i] = pi + step * mi / denom;
    m[i] = mi;
    v[i] = vi;
  }
}

struct Span {
  int64_t begin, end;
  bool decay;
};

}  // namespace

void sum_squares(const TensorView& out, const TensorView& x) {
  const int64_t n = check_sum_squares(out, x);
  const double s = with_act_type(x.dtype, [&](auto tag) { return sum_squares_t(x.as<const decltype(tag)>(), n); });
  write_scalar(out, read_scalar(out) + s);
}

void clip_scale(const TensorView& scale, const TensorView& sumsq, float max_norm) {
  check_clip_scale(scale, sumsq, max_norm);
  *scale.as<float>() = ref::clip_coefficient(read_scalar(sumsq), max_norm);  // one scalar: shared with ref
}

void adamw(const TensorView& p, const TensorView& g, const TensorView& m, const TensorView& v,
           const TensorView& decay_ranges, const TensorView& grad_scale, const TensorView& scaler,
           const Ops::AdamWStep& hp) {
  const int64_t n = check_adamw(p, g, m, v, decay_ranges, grad_scale, scaler, hp);
  const ref::AdamWStepNumber step = ref::adamw_step_number(scaler, hp);
  if (step.skip) return;  // an inf/NaN gradient: p, m, v untouched
  const double t = static_cast<double>(step.t);
  AdamWCoef k;
  k.grad_scale = grad_scale.empty() ? 1.0f : *grad_scale.as<const float>();
  k.decay = static_cast<float>(1.0 - step.lr * hp.weight_decay);
  k.w1 = static_cast<float>(1.0 - hp.beta1);
  k.beta2 = static_cast<float>(hp.beta2);
  k.w2 = static_cast<float>(1.0 - hp.beta2);
  k.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(hp.beta2, t)));
  k.eps = static_cast<float>(hp.eps);
  k.neg_step = static_cast<float>(-(step.lr / (1.0 - std::pow(hp.beta1, t))));

  // Cut [0, n) into runs that decay or not, then into chunks for the threads.
  std::vector<Span> runs;
  if (decay_ranges.rank == 0) {
    runs.push_back({0, n, true});
  } else {
    const int64_t* r = decay_ranges.as<const int64_t>();
    int64_t at = 0;
    for (int64_t i = 0; i < decay_ranges.dim(0); ++i) {
      if (r[2 * i] > at) runs.push_back({at, r[2 * i], false});
      if (r[2 * i + 1] > r[2 * i]) runs.push_back({r[2 * i], r[2 * i + 1], true});
      at = r[2 * i + 1];
    }
    if (at < n) runs.push_back({at, n, false});
  }
  std::vector<Span> chunks;
  for (const Span& s : runs)
    for (int64_t b = s.begin; b < s.end; b += kChunk) chunks.push_back({b, b + kChunk < s.end ? b + kChunk : s.end, s.decay});

  float* pp = p.as<float>();
  float* mp = m.as<float>();
  float* vp = v.as<float>();
  const float* gp = g.as<const float>();
  const int64_t count = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements && count > 1)
  for (int64_t c = 0; c < count; ++c) {
    const Span& s = chunks[static_cast<size_t>(c)];
    adamw_span(pp + s.begin, gp + s.begin, mp + s.begin, vp + s.begin, s.end - s.begin, s.decay ? k.decay : 1.0f, k);
  }
}

}  // namespace stoke::cpu::fast
