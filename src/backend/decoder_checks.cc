#include "backend/decoder_checks.h"

#include <fmt/format.h>

#include <cmath>

#include "backend/check_helpers.h"

namespace stoke {

using namespace checks;

namespace {

void need_eps(const char* op, float eps) {
  if (!(eps >= 0.0f) || !std::isfinite(eps)) fail(op, fmt::format("eps = {} must be finite and >= 0", eps));
}

// A scale vector [n], f32 or the activation dtype.
void need_scale(const char* op, const char* name, const TensorView& t, int64_t n, DType act) {
  need(op, name, t, 1);
  if (t.dtype != DType::f32 && t.dtype != act)
    fail(op, fmt::format("{} is {}, expected F32 or the activation dtype {}", name, describe(t), dtype_name(act)));
  need_dim(op, name, t, 0, n);
}

// heads, kv_heads and qkv's columns agree; returns the head dim.
int64_t need_gqa_columns(const char* op, const TensorView& qkv, int heads, int kv_heads) {
  need(op, "qkv", qkv, 2);
  need_act(op, "qkv", qkv);
  if (heads < 1 || kv_heads < 1 || heads % kv_heads != 0)
    fail(op, fmt::format("heads = {}, kv_heads = {}: both must be >= 1 and heads a multiple of kv_heads", heads,
                         kv_heads));
  const int64_t width = int64_t{heads} + 2 * int64_t{kv_heads}, C = qkv.dim(1);
  if (C == 0 || C % width != 0)
    fail(op, fmt::format("qkv is {}: columns must be (heads + 2 * kv_heads) * head_dim with heads = {}, kv_heads = {}",
                         qkv.shape_string(), heads, kv_heads));
  return C / width;
}

}  // namespace

RowsShape check_residual_rmsnorm(const TensorView& h, const TensorView& out, const TensorView& x,
                                 const TensorView& gamma, float eps) {
  const char* op = "residual_rmsnorm";
  need(op, "h", h, 2);
  need(op, "out", out, 2);
  need_act(op, "h", h);
  need_act(op, "out", out);
  const int64_t T = h.dim(0), H = h.dim(1);
  need_dim(op, "out", out, 0, T);
  need_dim(op, "out", out, 1, H);
  if (!x.empty()) {
    need(op, "x", x, 2);
    need_act(op, "x", x);
    need_dim(op, "x", x, 0, T);
    need_dim(op, "x", x, 1, H);
    need_no_overlap(op, "x", x, "h", h);
    need_no_overlap(op, "out", out, "x", x);
  }
  // out may be h itself (in place, row by row), never a part of it.
  if (overlap(out, h) && !(out.data == h.data && out.dtype == h.dtype))
    fail(op, "out overlaps h (only h itself, same dtype, is allowed)");
  need_scale(op, "gamma", gamma, H, out.dtype);
  need_no_overlap(op, "out", out, "gamma", gamma);
  need_eps(op, eps);
  return {T, H};
}

GqaShape check_head_rmsnorm(const TensorView& qkv, const TensorView& q_gamma, const TensorView& k_gamma, int heads,
                            int kv_heads, float eps) {
  const char* op = "head_rmsnorm";
  const int64_t d = need_gqa_columns(op, qkv, heads, kv_heads);
  need_scale(op, "q_gamma", q_gamma, d, qkv.dtype);
  need_scale(op, "k_gamma", k_gamma, d, qkv.dtype);
  need_no_overlap(op, "qkv", qkv, "q_gamma", q_gamma);
  need_no_overlap(op, "qkv", qkv, "k_gamma", k_gamma);
  need_eps(op, eps);
  return {qkv.dim(0), 0, heads, kv_heads, d};
}

GqaShape check_attention_gqa(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                             int kv_heads, int max_seqlen, IndexData where) {
  const char* op = "attention_gqa";
  const int64_t d = need_gqa_columns(op, qkv, heads, kv_heads);
  need(op, "out", out, 2);
  need_dtype(op, "out", out, qkv.dtype);
  const int64_t T = qkv.dim(0);
  need_dim(op, "out", out, 0, T);
  need_dim(op, "out", out, 1, heads * d);
  need_no_overlap(op, "out", out, "qkv", qkv);
  if (max_seqlen < 0) fail(op, fmt::format("max_seqlen = {}, expected >= 0", max_seqlen));
  const int64_t B = need_cu_seqlens(op, cu_seqlens, T, where);
  if (where == IndexData::host) {
    const int32_t* c = cu_seqlens.as<const int32_t>();
    for (int64_t b = 0; b < B; ++b)
      if (c[b + 1] - c[b] > max_seqlen)
        fail(op, fmt::format("sequence {} has {} tokens, more than max_seqlen = {}", b, c[b + 1] - c[b], max_seqlen));
  }
  return {T, B, heads, kv_heads, d};
}

}  // namespace stoke
