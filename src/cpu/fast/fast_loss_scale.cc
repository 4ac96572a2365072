// f16 training's loss-scale ops (torch.amp.GradScaler): x *= scale, g *=
// 1 / scale with the found-inf flag, and the scale's update, the scaler's
// slots and rule backend/loss_scale_rule.h's. Threads over fixed chunks; the
// flag is the OR of the chunks' flags, so it does not depend on the thread
// count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_ops.h"
#include "backend/train_checks.h"
#include "backend/loss_scale_rule.h"

namespace stoke::cpu::fast {

namespace {

constexpr int64_t kChunk = 1 << 14;  // elements per unscale span

// g *= inv in f32, rounded once to T; whether any element was inf or NaN before.
template <class T>
STOKE_CPU_CLONES char unscale_span(T* g, int64_t n, float inv) {
  char bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = to_float(g[i]);
    bad |= static_cast<char>(!std::isfinite(v));
    g[i] = narrow_one<T>(v * inv);
  }
  return bad;
}

}  // namespace

void loss_scale_multiply(const TensorView& x, const TensorView& scaler) {
  const int64_t n = check_loss_scale_multiply(x, scaler);
  const float scale = static_cast<float>(scaler.as<const double>()[Ops::LossScaler::kScale]);
  with_act_type(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* xp = x.as<T>();
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) xp[i] = narrow_one<T>(to_float(xp[i]) * scale);
  });
}

void loss_scale_unscale(const TensorView& g, const TensorView& scaler) {
  const int64_t n = check_loss_scale_unscale(g, scaler);
  double* s = scaler.as<double>();
  const float inv = inverse_loss_scale(static_cast<float>(s[Ops::LossScaler::kScale]));
  const bool found_inf = with_act_type(g.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* gp = g.as<T>();
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<char> bad(static_cast<size_t>(chunks), 0);
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t end = std::min(n, (c + 1) * kChunk);
      bad[static_cast<size_t>(c)] = unscale_span(gp + c * kChunk, end - c * kChunk, inv);
    }
    return std::any_of(bad.begin(), bad.end(), [](char b) { return b != 0; });
  });
  if (found_inf) s[Ops::LossScaler::kFoundInf] = 1.0;
}

void loss_scale_update(const TensorView& scaler, float growth_factor, float backoff_factor, int growth_interval) {
  check_loss_scale_update(scaler, growth_factor, backoff_factor, growth_interval);
  update_loss_scaler_slots(scaler.as<double>(), growth_factor, backoff_factor, growth_interval);
}

}  // namespace stoke::cpu::fast
