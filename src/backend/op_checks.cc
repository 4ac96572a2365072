#include "backend/op_checks.h"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "backend/check_helpers.h"

namespace stoke {

namespace {

using namespace checks;  // the helpers every check is made of


// Weights and biases: f32 or the activation dtype.
void need_weight(const char* op, const char* name, const TensorView& t, DType act) {
  if (t.dtype != DType::f32 && t.dtype != act)
    fail(op, fmt::format("{} is {}, expected F32 or the activation dtype {}", name, describe(t), dtype_name(act)));
}

void need_eps(const char* op, float eps) {
  if (!(eps >= 0.0f) || !std::isfinite(eps)) fail(op, fmt::format("eps = {} must be finite and >= 0", eps));
}

void need_gamma_beta(const char* op, const TensorView& gamma, const TensorView& beta, int64_t H, DType act) {
  need(op, "gamma", gamma, 1);
  need(op, "beta", beta, 1);
  need_weight(op, "gamma", gamma, act);
  need_weight(op, "beta", beta, act);
  need_dim(op, "gamma", gamma, 0, H);
  need_dim(op, "beta", beta, 0, H);
}

}  // namespace

LinearShape check_linear(const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias,
                         Activation act, Accumulate acc) {
  const char* op = "linear";
  need(op, "a", a, 2);
  need(op, "w", w, 2);
  need(op, "out", out, 2);
  need_act(op, "a", a);
  // The output is in the activation dtype, or f32 (low-precision GEMMs that
  // feed the f32 residual stream).
  if (out.dtype != a.dtype) need_dtype(op, "out", out, DType::f32);
  need_weight(op, "w", w, a.dtype);
  const int64_t M = a.dim(0), K = a.dim(1), N = w.dim(0);
  need_dim(op, "w", w, 1, K);
  need_dim(op, "out", out, 0, M);
  need_dim(op, "out", out, 1, N);
  if (!bias.empty()) {
    need(op, "bias", bias, 1);
    need_weight(op, "bias", bias, a.dtype);
    need_dim(op, "bias", bias, 0, N);
  }
  need_no_overlap(op, "out", out, "a", a);
  need_no_overlap(op, "out", out, "w", w);
  if (acc == Accumulate::yes) {
    // The folded residual add: the residual stream is f32, and every
    // backend adds after the bias with no activation to apply after it.
    if (out.dtype != DType::f32)
      fail(op, fmt::format("accumulating into out {}: only an F32 out may accumulate", describe(out)));
    if (act != Activation::none) fail(op, "accumulating into out takes no activation (Activation::none)");
    need_no_overlap(op, "out", out, "bias", bias);
  }
  return {M, N, K};
}

LinearShape check_linear_int8(const TensorView& out, const TensorView& a, const TensorView& wq,
                              const TensorView& wq_meta, const TensorView& bias) {
  const char* op = "linear_int8";
  need(op, "a", a, 2);
  need(op, "wq", wq, 2);
  need(op, "wq_meta", wq_meta, 2);
  need(op, "out", out, 2);
  need_dtype(op, "a", a, DType::f32);
  need_dtype(op, "wq", wq, DType::i8);
  need_dtype(op, "wq_meta", wq_meta, DType::f32);
  need_dtype(op, "out", out, DType::f32);
  const int64_t M = a.dim(0), K = a.dim(1), N = wq.dim(0);
  need_dim(op, "wq", wq, 1, K);
  need_dim(op, "wq_meta", wq_meta, 0, 2);
  need_dim(op, "wq_meta", wq_meta, 1, N);
  need_dim(op, "out", out, 0, M);
  need_dim(op, "out", out, 1, N);
  if (!bias.empty()) {
    need(op, "bias", bias, 1);
    need_dtype(op, "bias", bias, DType::f32);
    need_dim(op, "bias", bias, 0, N);
  }
  // int32 accumulation of K products of at most 255 * 127 stays exact.
  if (K >= 66000) throw Error(Errc::invalid_argument, "linear_int8: K = " + std::to_string(K) + " exceeds 65999 (int32 accumulation)");
  need_no_overlap(op, "out", out, "a", a);
  need_no_overlap(op, "out", out, "wq", wq);
  return {M, N, K};
}

RowsShape check_embed_layernorm(const TensorView& out, const TensorView& ids, const TensorView& positions,
                                const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                                const TensorView& type, const TensorView& gamma, const TensorView& beta, float eps,
                                IndexData where) {
  const char* op = "embed_layernorm";
  need(op, "out", out, 2);
  need_act(op, "out", out);
  const int64_t T = out.dim(0), H = out.dim(1);
  need(op, "word", word, 2);
  need(op, "pos", pos, 2);
  need_weight(op, "word", word, out.dtype);
  need_weight(op, "pos", pos, out.dtype);
  need_dim(op, "word", word, 1, H);
  need_dim(op, "pos", pos, 1, H);
  need_indices(op, "ids", ids, T, word.dim(0), where);
  need_indices(op, "positions", positions, T, pos.dim(0), where);
  if (!type.empty()) {
    need(op, "type", type, 2);
    need_weight(op, "type", type, out.dtype);
    need_dim(op, "type", type, 1, H);
    if (type_ids.empty() && type.dim(0) < 1) fail(op, "type has no rows, but row 0 is used when type_ids is empty");
  }
  if (!type_ids.empty()) {
    if (type.empty()) fail(op, "type_ids given without a type embedding table");
    need_indices(op, "type_ids", type_ids, T, type.dim(0), where);
  }
  need_gamma_beta(op, gamma, beta, H, out.dtype);
  need_eps(op, eps);
  return {T, H};
}

RowsShape check_residual_layernorm(const TensorView& out, const TensorView& x, const TensorView& residual,
                                   const TensorView& gamma, const TensorView& beta, float eps) {
  const char* op = "residual_layernorm";
  need(op, "out", out, 2);
  need(op, "x", x, 2);
  if (!residual.empty()) need(op, "residual", residual, 2);
  need_act(op, "out", out);
  need_dtype(op, "x", x, out.dtype);
  if (!residual.empty()) need_dtype(op, "residual", residual, out.dtype);
  const int64_t T = out.dim(0), H = out.dim(1);
  for (const auto* t : {&x, &residual}) {
    if (t == &residual && residual.empty()) continue;  // LayerNorm of x alone
    need_dim(op, t == &x ? "x" : "residual", *t, 0, T);
    need_dim(op, t == &x ? "x" : "residual", *t, 1, H);
  }
  // out may alias x or residual exactly (row-wise in place), but not partially.
  if (overlap(out, x) && out.data != x.data) fail(op, "out partially overlaps x");
  if (overlap(out, residual) && out.data != residual.data) fail(op, "out partially overlaps residual");
  need_gamma_beta(op, gamma, beta, H, out.dtype);
  need_eps(op, eps);
  return {T, H};
}

void check_layernorm_copy(const char* op, const TensorView& out, const TensorView& out_low,
                          std::initializer_list<const TensorView*> inputs) {
  if (out_low.empty()) return;
  need(op, "out_low", out_low, 2);
  need_act(op, "out_low", out_low);
  need_dim(op, "out_low", out_low, 0, out.dim(0));
  need_dim(op, "out_low", out_low, 1, out.dim(1));
  need_no_overlap(op, "out_low", out_low, "out", out);
  for (const TensorView* in : inputs) need_no_overlap(op, "out_low", out_low, "an input", *in);
}

RowsShape check_bias_gelu(const TensorView& x, const TensorView& bias) {
  const char* op = "bias_gelu";
  need(op, "x", x, 2);
  need_act(op, "x", x);
  if (!bias.empty()) {
    need(op, "bias", bias, 1);
    need_weight(op, "bias", bias, x.dtype);
    need_dim(op, "bias", bias, 0, x.dim(1));
  }
  return {x.dim(0), x.dim(1)};
}

AttentionShape check_attention(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                               int max_seqlen, int window, IndexData where) {
  const char* op = "attention";
  if (window < 0) fail(op, fmt::format("window = {}, expected >= 0 (0: global attention)", window));
  need(op, "qkv", qkv, 2);
  need(op, "out", out, 2);
  need_act(op, "qkv", qkv);
  need_dtype(op, "out", out, qkv.dtype);
  if (heads < 1) fail(op, fmt::format("heads = {}, expected >= 1", heads));
  const int64_t T = qkv.dim(0), C = qkv.dim(1);
  if (C == 0 || C % (3 * int64_t{heads}) != 0)
    fail(op, fmt::format("qkv is {}: columns must be 3 * heads * head_dim with heads = {}", qkv.shape_string(), heads));
  const int64_t d = C / (3 * int64_t{heads});
  need_dim(op, "out", out, 0, T);
  need_dim(op, "out", out, 1, heads * d);
  need_no_overlap(op, "out", out, "qkv", qkv);
  if (max_seqlen < 0) fail(op, fmt::format("max_seqlen = {}, expected >= 0", max_seqlen));
  const int64_t B = need_cu_seqlens(op, cu_seqlens, T, where);
  if (where == IndexData::device) return {T, B, heads, d};
  const int32_t* c = cu_seqlens.as<const int32_t>();
  for (int64_t b = 0; b < B; ++b)
    if (c[b + 1] - c[b] > max_seqlen)
      fail(op, fmt::format("sequence {} has {} tokens, more than max_seqlen = {}", b, c[b + 1] - c[b], max_seqlen));
  return {T, B, heads, d};
}

PoolShape check_pool(const TensorView& out, const TensorView& h, const TensorView& cu_seqlens, IndexData where) {
  const char* op = "pool";
  need(op, "h", h, 2);
  need(op, "out", out, 2);
  need_act(op, "h", h);
  need_dtype(op, "out", out, DType::f32);
  const int64_t T = h.dim(0), H = h.dim(1);
  const int64_t B = need_cu_seqlens(op, cu_seqlens, T, where);
  need_dim(op, "out", out, 0, B);
  need_dim(op, "out", out, 1, H);
  need_no_overlap(op, "out", out, "h", h);
  return {T, B, H};
}

RowsShape check_l2_normalize(const TensorView& x) {
  const char* op = "l2_normalize";
  need(op, "x", x, 2);
  need_dtype(op, "x", x, DType::f32);
  return {x.dim(0), x.dim(1)};
}

RowsShape check_gather_rows(const TensorView& out, const TensorView& h, const TensorView& rows, IndexData where) {
  const char* op = "gather_rows";
  need(op, "h", h, 2);
  need(op, "out", out, 2);
  need_act(op, "h", h);
  need_act(op, "out", out);
  const int64_t B = out.dim(0), H = h.dim(1);
  need_dim(op, "out", out, 1, H);
  need_indices(op, "rows", rows, B, h.dim(0), where);
  need_no_overlap(op, "out", out, "h", h);
  return {B, H};
}

RowsShape check_slice_columns(const TensorView& out, const TensorView& in) {
  const char* op = "slice_columns";
  need(op, "in", in, 2);
  need(op, "out", out, 2);
  need_act(op, "in", in);
  need_act(op, "out", out);
  need_dim(op, "out", out, 0, in.dim(0));
  if (out.dim(1) > in.dim(1))
    fail(op,
         fmt::format("out is {}: cannot take {} columns of in {}", out.shape_string(), out.dim(1), in.shape_string()));
  need_no_overlap(op, "out", out, "in", in);
  return {out.dim(0), out.dim(1)};
}

int64_t check_convert(const TensorView& out, const TensorView& in) {
  const char* op = "convert";
  need(op, "in", in, in.rank);
  need(op, "out", out, out.rank);
  need_act(op, "in", in);
  need_act(op, "out", out);
  if (out.rank != in.rank) fail(op, fmt::format("out is {}, in is {}: shapes differ", describe(out), describe(in)));
  for (int i = 0; i < in.rank; ++i)
    if (out.dim(i) != in.dim(i))
      fail(op, fmt::format("out is {}, in is {}: shapes differ", describe(out), describe(in)));
  if (overlap(out, in) && !(out.data == in.data && out.dtype == in.dtype))
    fail(op, "out overlaps in (only an identical same-dtype view is allowed)");
  return in.numel();
}

}  // namespace stoke
