#include "backend/train_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "backend/check_helpers.h"

namespace stoke {

namespace {

using namespace checks;  // the helpers every check is made of

// out is exactly in (an in-place call) or does not touch it.
void need_in_place_or_apart(const char* op, const char* out_name, const TensorView& out, const char* in_name,
                        const TensorView& in) {
  if (out.data == in.data && out.bytes() == in.bytes()) return;
  need_no_overlap(op, out_name, out, in_name, in);
}

// One element of f64 or f32 (a device scalar).
void need_scalar(const char* op, const char* name, const TensorView& t, bool allow_f64) {
  need_any_rank(op, name, t);
  if (t.numel() != 1) fail(op, fmt::format("{} is {}, expected one element", name, describe(t)));
  if (!(t.dtype == DType::f32 || (allow_f64 && t.dtype == DType::f64)))
    fail(op, fmt::format("{} is {}, expected {}", name, describe(t), allow_f64 ? "F64 or F32" : "F32"));
}

// metrics[3] f64 or empty.
void need_metrics(const char* op, const TensorView& metrics) {
  if (metrics.empty()) return;
  need(op, "metrics", metrics, 1);
  need_dtype(op, "metrics", metrics, DType::f64);
  need_dim(op, "metrics", metrics, 0, 3);
}

void need_finite(const char* op, const char* name, double v) {
  if (!std::isfinite(v)) fail(op, fmt::format("{} = {} must be finite", name, v));
}

}  // namespace

void need_dropout_step(const char* op, const Ops::DropoutStep& step) {
  if (step.device.empty()) return;
  if (step.device.dtype != DType::u32 || step.device.numel() != 1)
    fail(op, fmt::format("the device step is {}, expected U32 [1]", describe(step.device)));
}

DropoutRange check_dropout(const char* op, const TensorView& out, const TensorView& x, float p,
                           const Ops::DropoutStep& step, uint64_t row_offset) {
  need_any_rank(op, "x", x);
  need_dropout_step(op, step);
  need_any_rank(op, "out", out);
  if (!is_act(x.dtype)) fail(op, fmt::format("x is {}, expected F32, BF16 or F16", describe(x)));
  need_dtype(op, "out", out, x.dtype);
  if (out.rank != x.rank || out.dims != x.dims)
    fail(op, fmt::format("out is {}, expected the shape of x {}", out.shape_string(), x.shape_string()));
  if (!(p >= 0.0f && p <= 1.0f)) fail(op, fmt::format("p = {} must be in [0, 1]", p));
  need_in_place_or_apart(op, "out", out, "x", x);
  DropoutRange r;
  r.n = x.numel();
  const uint64_t row = x.rank > 0 && x.dim(0) > 0 ? static_cast<uint64_t>(r.n / x.dim(0)) : 1;
  if (row_offset > (UINT64_MAX - static_cast<uint64_t>(r.n)) / std::max<uint64_t>(row, 1))
    fail(op, fmt::format("row_offset {} x {} elements per row overflows the 64-bit mask index", row_offset, row));
  r.first = row_offset * row;
  return r;
}

LossShape check_cross_entropy(const TensorView& dlogits, const TensorView& metrics, const TensorView& logits,
                              const TensorView& labels, float label_smoothing, float scale, IndexData where) {
  const char* op = "cross_entropy";
  need(op, "logits", logits, 2);
  need_dtype(op, "logits", logits, DType::f32);
  const int64_t B = logits.dim(0), C = logits.dim(1);
  if (C < 1) fail(op, fmt::format("logits is {}: expected at least one class", describe(logits)));
  need(op, "labels", labels, 1);
  need_dtype(op, "labels", labels, DType::i32);
  need_dim(op, "labels", labels, 0, B);
  const int32_t* y = where == IndexData::host ? labels.as<const int32_t>() : nullptr;  // device: not readable here
  for (int64_t b = 0; y && b < B; ++b)
    if (y[b] < 0 || y[b] >= C) fail(op, fmt::format("labels[{}] = {} is out of range [0, {})", b, y[b], C));
  if (!dlogits.empty()) {
    need(op, "dlogits", dlogits, 2);
    need_dtype(op, "dlogits", dlogits, DType::f32);
    need_dim(op, "dlogits", dlogits, 0, B);
    need_dim(op, "dlogits", dlogits, 1, C);
    need_in_place_or_apart(op, "dlogits", dlogits, "logits", logits);
    need_no_overlap(op, "dlogits", dlogits, "labels", labels);
    need_no_overlap(op, "dlogits", dlogits, "metrics", metrics);
  }
  need_metrics(op, metrics);
  need_no_overlap(op, "metrics", metrics, "logits", logits);
  need_no_overlap(op, "metrics", metrics, "labels", labels);
  if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f))
    fail(op, fmt::format("label_smoothing = {} must be in [0, 1]", label_smoothing));
  need_finite(op, "scale", scale);
  return {B, C};
}

LossShape check_mse_loss(const TensorView& dpred, const TensorView& metrics, const TensorView& pred,
                         const TensorView& target, float scale) {
  const char* op = "mse_loss";
  need(op, "pred", pred, 2);
  need_dtype(op, "pred", pred, DType::f32);
  need_dim(op, "pred", pred, 1, 1);
  const int64_t B = pred.dim(0);
  need(op, "target", target, 1);
  need_dtype(op, "target", target, DType::f32);
  need_dim(op, "target", target, 0, B);
  if (!dpred.empty()) {
    need(op, "dpred", dpred, 2);
    need_dtype(op, "dpred", dpred, DType::f32);
    need_dim(op, "dpred", dpred, 0, B);
    need_dim(op, "dpred", dpred, 1, 1);
    need_in_place_or_apart(op, "dpred", dpred, "pred", pred);
    need_no_overlap(op, "dpred", dpred, "target", target);
    need_no_overlap(op, "dpred", dpred, "metrics", metrics);
  }
  need_metrics(op, metrics);
  need_no_overlap(op, "metrics", metrics, "pred", pred);
  need_no_overlap(op, "metrics", metrics, "target", target);
  need_finite(op, "scale", scale);
  return {B, 1};
}

int64_t check_sum_squares(const TensorView& out, const TensorView& x) {
  const char* op = "sum_squares";
  need_scalar(op, "out", out, true);
  need_any_rank(op, "x", x);
  if (!is_act(x.dtype)) fail(op, fmt::format("x is {}, expected F32, BF16 or F16", describe(x)));
  need_no_overlap(op, "out", out, "x", x);
  return x.numel();
}

void check_clip_scale(const TensorView& scale, const TensorView& sumsq, float max_norm) {
  const char* op = "clip_scale";
  need_scalar(op, "scale", scale, false);
  need_scalar(op, "sumsq", sumsq, true);
  need_no_overlap(op, "scale", scale, "sumsq", sumsq);
  if (!(max_norm > 0.0f) || !std::isfinite(max_norm))
    fail(op, fmt::format("max_norm = {} must be positive and finite (0 disables clipping: skip the op)", max_norm));
}

namespace {

void need_scaler(const char* op, const TensorView& scaler) {
  need(op, "scaler", scaler, 1);
  need_dtype(op, "scaler", scaler, DType::f64);
  need_dim(op, "scaler", scaler, 0, Ops::LossScaler::kSlots);
}

int64_t check_scaled_tensor(const char* op, const char* name, const TensorView& x, const TensorView& scaler) {
  need_scaler(op, scaler);
  need_any_rank(op, name, x);
  need_act(op, name, x);
  need_no_overlap(op, name, x, "scaler", scaler);
  return x.numel();
}

}  // namespace

int64_t check_loss_scale_multiply(const TensorView& x, const TensorView& scaler) {
  return check_scaled_tensor("loss_scale_multiply", "x", x, scaler);
}

int64_t check_loss_scale_unscale(const TensorView& g, const TensorView& scaler) {
  return check_scaled_tensor("loss_scale_unscale", "g", g, scaler);
}

void check_loss_scale_update(const TensorView& scaler, float growth_factor, float backoff_factor,
                             int growth_interval) {
  const char* op = "loss_scale_update";
  need_scaler(op, scaler);
  if (!(growth_factor > 1.0f) || !std::isfinite(growth_factor))
    fail(op, fmt::format("growth_factor = {} must be finite and above 1", growth_factor));
  if (!(backoff_factor > 0.0f && backoff_factor < 1.0f))
    fail(op, fmt::format("backoff_factor = {} must be in (0, 1)", backoff_factor));
  if (growth_interval < 1) fail(op, fmt::format("growth_interval = {} must be at least 1", growth_interval));
}

int64_t check_adamw(const TensorView& p, const TensorView& g, const TensorView& m, const TensorView& v,
                    const TensorView& decay_ranges, const TensorView& grad_scale, const TensorView& scaler,
                    const Ops::AdamWStep& hp) {
  const char* op = "adamw";
  const TensorView* t[4] = {&p, &g, &m, &v};
  const char* names[4] = {"p", "g", "m", "v"};
  for (int i = 0; i < 4; ++i) {
    need_any_rank(op, names[i], *t[i]);
    need_dtype(op, names[i], *t[i], DType::f32);
    if (t[i]->numel() != p.numel())
      fail(op, fmt::format("{} is {}, expected {} elements as p", names[i], describe(*t[i]), p.numel()));
    for (int j = 0; j < i; ++j) need_no_overlap(op, names[i], *t[i], names[j], *t[j]);
  }
  const int64_t n = p.numel();
  if (!grad_scale.empty()) {
    need_scalar(op, "grad_scale", grad_scale, false);
    for (int i = 0; i < 4; ++i) need_no_overlap(op, "grad_scale", grad_scale, names[i], *t[i]);
  }
  if (!scaler.empty()) {
    need_scaler(op, scaler);
    for (int i = 0; i < 4; ++i) need_no_overlap(op, names[i], *t[i], "scaler", scaler);
  }
  if (decay_ranges.rank != 0) {  // TensorView{} = decay everywhere; [0, 2] = nowhere
    need(op, "decay_ranges", decay_ranges, 2);
    need_dtype(op, "decay_ranges", decay_ranges, DType::i64);
    need_dim(op, "decay_ranges", decay_ranges, 1, 2);
    const int64_t* r = decay_ranges.as<const int64_t>();
    int64_t prev_end = 0;
    for (int64_t i = 0; i < decay_ranges.dim(0); ++i) {
      const int64_t begin = r[2 * i], end = r[2 * i + 1];
      if (begin < prev_end || end < begin || end > n)
        fail(op, fmt::format("decay_ranges[{}] = [{}, {}): ranges must be sorted, disjoint and inside [0, {})", i,
                             begin, end, n));
      prev_end = end;
    }
  }
  if (!hp.device.empty()) {  // {t, lr} in device memory: the shape here, the values where they are read
    need(op, "hp.device", hp.device, 1);
    need_dtype(op, "hp.device", hp.device, DType::f64);
    need_dim(op, "hp.device", hp.device, 0, 2);
    for (int i = 0; i < 4; ++i) need_no_overlap(op, names[i], *t[i], "hp.device", hp.device);
  } else {
    if (hp.step < 1) fail(op, fmt::format("step = {} must be at least 1 (the first step is 1)", hp.step));
    if (!(hp.lr >= 0.0) || !std::isfinite(hp.lr)) fail(op, fmt::format("lr = {} must be finite and >= 0", hp.lr));
  }
  if (!(hp.beta1 >= 0.0 && hp.beta1 < 1.0)) fail(op, fmt::format("beta1 = {} must be in [0, 1)", hp.beta1));
  if (!(hp.beta2 >= 0.0 && hp.beta2 < 1.0)) fail(op, fmt::format("beta2 = {} must be in [0, 1)", hp.beta2));
  if (!(hp.eps >= 0.0) || !std::isfinite(hp.eps)) fail(op, fmt::format("eps = {} must be finite and >= 0", hp.eps));
  if (!(hp.weight_decay >= 0.0) || !std::isfinite(hp.weight_decay))
    fail(op, fmt::format("weight_decay = {} must be finite and >= 0", hp.weight_decay));
  return n;
}

double read_scalar(const TensorView& t) {
  return t.dtype == DType::f64 ? *t.as<const double>() : static_cast<double>(*t.as<const float>());
}

void write_scalar(const TensorView& t, double v) {
  if (t.dtype == DType::f64)
    *t.as<double>() = v;
  else
    *t.as<float>() = static_cast<float>(v);
}

}  // namespace stoke
