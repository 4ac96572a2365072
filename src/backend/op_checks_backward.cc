#include "backend/op_checks_backward.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>

#include "core/error.h"
#include "backend/check_helpers.h"
#include "backend/train_checks.h"

namespace stoke {

namespace {

using namespace checks;  // the helpers every check is made of

// A 2-D activation (or activation gradient) of shape [rows, cols].
void need_rows(const char* op, const char* name, const TensorView& t, int64_t rows, int64_t cols) {
  need(op, name, t, 2);
  need_act(op, name, t);
  need_dim(op, name, t, 0, rows);
  need_dim(op, name, t, 1, cols);
}

// An f32 tensor shaped like `like` (a parameter gradient or a statistic).
void need_f32_like(const char* op, const char* name, const TensorView& t, const TensorView& like) {
  need(op, name, t, like.rank);
  need_dtype(op, name, t, DType::f32);
  for (int i = 0; i < like.rank; ++i) need_dim(op, name, t, i, like.dim(i));
}

void need_f32_vector(const char* op, const char* name, const TensorView& t, int64_t n) {
  need(op, name, t, 1);
  need_dtype(op, name, t, DType::f32);
  need_dim(op, name, t, 0, n);
}

// An element-wise output may be the very same view as an input, never a partial overlap.
void need_same_view_or_apart(const char* op, const char* out_name, const TensorView& out, const char* in_name,
                        const TensorView& in) {
  if (overlap(out, in) && !(out.data == in.data && out.dtype == in.dtype))
    fail(op, fmt::format("{} overlaps {} (only the identical view is allowed)", out_name, in_name));
}

// A 1-D activation-dtype vector of n elements (LayerNorm gamma in backward).
void need_act_vector(const char* op, const char* name, const TensorView& t, int64_t n) {
  need(op, name, t, 1);
  need_act(op, name, t);
  need_dim(op, name, t, 0, n);
}

// The attention-probability dropout's p (NaN fails too).
void need_dropout_p(const char* op, const Ops::AttentionDropout& dropout) {
  if (!(dropout.p >= 0.0f && dropout.p <= 1.0f))
    fail(op, fmt::format("attention dropout p = {}, expected a probability in [0, 1]", dropout.p));
  need_dropout_step(op, dropout.step);
}

// Every (row, head) of the mask's index, row_offset included, fits the 32
// bits above the key's (Ops::AttentionDropout::row_index).
void need_dropout_rows(const char* op, const Ops::AttentionDropout& dropout, int64_t T, int64_t heads) {
  if (dropout.p == 0.0f) return;  // no mask is drawn
  const uint64_t limit = uint64_t{1} << (64 - Ops::AttentionDropout::kKeyBits);
  const uint64_t rows = limit / static_cast<uint64_t>(std::max<int64_t>(heads, 1));
  if (dropout.row_offset >= rows || static_cast<uint64_t>(T) > rows - dropout.row_offset)
    fail(op, fmt::format("attention dropout row_offset {} + {} rows x {} heads, expected under 2^32 (row, head) pairs",
                         dropout.row_offset, T, heads));
}

}  // namespace

LinearShape check_linear_backward(const TensorView& da, const TensorView& dw, const TensorView& db,
                                  const TensorView& dy, const TensorView& a, const TensorView& w,
                                  Accumulate da_acc) {
  const char* op = "linear_backward";
  need(op, "a", a, 2);
  need(op, "w", w, 2);
  need_act(op, "a", a);
  need_act(op, "w", w);
  const int64_t M = a.dim(0), K = a.dim(1), N = w.dim(0);
  need_dim(op, "w", w, 1, K);
  need_rows(op, "dy", dy, M, N);
  if (!da.empty()) {
    need_rows(op, "da", da, M, K);
    for (const auto& [name, t] : {std::pair{"dy", &dy}, std::pair{"a", &a}, std::pair{"w", &w}})
      need_no_overlap(op, "da", da, name, *t);
    if (da_acc == Accumulate::yes && da.dtype != DType::f32)
      fail(op, fmt::format("accumulating into da {}: only an F32 da may accumulate", describe(da)));
  }
  if (!dw.empty()) {
    need_f32_like(op, "dw", dw, w);
    for (const auto& [name, t] : {std::pair{"dy", &dy}, std::pair{"a", &a}, std::pair{"w", &w}, std::pair{"da", &da}})
      need_no_overlap(op, "dw", dw, name, *t);
  }
  if (!db.empty()) {
    need_f32_vector(op, "db", db, N);
    for (const auto& [name, t] : {std::pair{"dy", &dy}, std::pair{"da", &da}, std::pair{"dw", &dw}})
      need_no_overlap(op, "db", db, name, *t);
  }
  return {M, N, K};
}

RowsShape check_residual_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                                         const TensorView& x, const TensorView& residual, const TensorView& gamma,
                                         const TensorView& beta, float eps) {
  const char* op = "residual_layernorm_train";
  need(op, "residual", residual, 2);  // not optional here, unlike residual_layernorm's
  const RowsShape s = check_residual_layernorm(out, x, residual, gamma, beta, eps);
  need_f32_vector(op, "mean", mean, s.T);
  need_f32_vector(op, "rstd", rstd, s.T);
  for (const auto& [name, t] : {std::pair{"out", &out}, std::pair{"x", &x}, std::pair{"residual", &residual}}) {
    need_no_overlap(op, "mean", mean, name, *t);
    need_no_overlap(op, "rstd", rstd, name, *t);
  }
  need_no_overlap(op, "mean", mean, "rstd", rstd);
  return s;
}

RowsShape check_layernorm_backward(const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta,
                                   const TensorView& dy, const TensorView& x, const TensorView& residual,
                                   const TensorView& mean, const TensorView& rstd, const TensorView& gamma,
                                   Accumulate dx_acc) {
  const char* op = "layernorm_backward";
  need(op, "dy", dy, 2);
  need_act(op, "dy", dy);
  const int64_t T = dy.dim(0), H = dy.dim(1);
  need_rows(op, "x", x, T, H);
  if (!residual.empty()) need_rows(op, "residual", residual, T, H);
  need_rows(op, "dx", dx, T, H);
  need_f32_vector(op, "mean", mean, T);
  need_f32_vector(op, "rstd", rstd, T);
  need_act_vector(op, "gamma", gamma, H);
  if (dx_acc == Accumulate::yes) {
    // The folded residual add: the gradient stream is f32. dx += ds(dy) with
    // dx = dy is no gradient any caller wants, and the kernels' in-place
    // guarantee (every dy read before its dx write) covers dx = ds only.
    if (dx.dtype != DType::f32)
      fail(op, fmt::format("accumulating into dx {}: only an F32 dx may accumulate", describe(dx)));
    need_no_overlap(op, "dx", dx, "dy", dy);
  } else {
    need_same_view_or_apart(op, "dx", dx, "dy", dy);
  }
  for (const auto& [name, t] : {std::pair{"x", &x}, std::pair{"residual", &residual}, std::pair{"mean", &mean},
                                std::pair{"rstd", &rstd}, std::pair{"gamma", &gamma}})
    need_no_overlap(op, "dx", dx, name, *t);
  for (const auto& [name, g] : {std::pair{"dgamma", &dgamma}, std::pair{"dbeta", &dbeta}}) {
    if (g->empty()) continue;
    need_f32_vector(op, name, *g, H);
    for (const auto& [n2, t] : {std::pair{"dx", &dx}, std::pair{"dy", &dy}, std::pair{"gamma", &gamma}})
      need_no_overlap(op, name, *g, n2, *t);
  }
  need_no_overlap(op, "dgamma", dgamma, "dbeta", dbeta);
  return {T, H};
}

RowsShape check_embed_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                                      const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
                                      const TensorView& word, const TensorView& pos, const TensorView& type,
                                      const TensorView& gamma, const TensorView& beta, float eps, IndexData where) {
  const char* op = "embed_layernorm_train";
  const RowsShape s = check_embed_layernorm(out, ids, positions, type_ids, word, pos, type, gamma, beta, eps, where);
  need_f32_vector(op, "mean", mean, s.T);
  need_f32_vector(op, "rstd", rstd, s.T);
  need_no_overlap(op, "mean", mean, "out", out);
  need_no_overlap(op, "rstd", rstd, "out", out);
  need_no_overlap(op, "mean", mean, "rstd", rstd);
  return s;
}

RowsShape check_embed_layernorm_backward(const TensorView& dword, const TensorView& dpos, const TensorView& dtype,
                                         const TensorView& dgamma, const TensorView& dbeta, const TensorView& dy,
                                         const TensorView& ids, const TensorView& positions,
                                         const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                                         const TensorView& type, const TensorView& mean, const TensorView& rstd,
                                         const TensorView& gamma, IndexData where) {
  const char* op = "embed_layernorm_backward";
  need(op, "dy", dy, 2);
  need_act(op, "dy", dy);
  const int64_t T = dy.dim(0), H = dy.dim(1);
  need(op, "word", word, 2);
  need(op, "pos", pos, 2);
  need_act(op, "word", word);
  need_act(op, "pos", pos);
  need_dim(op, "word", word, 1, H);
  need_dim(op, "pos", pos, 1, H);
  need_indices(op, "ids", ids, T, word.dim(0), where);
  need_indices(op, "positions", positions, T, pos.dim(0), where);
  if (!type.empty()) {
    need(op, "type", type, 2);
    need_act(op, "type", type);
    need_dim(op, "type", type, 1, H);
    if (type_ids.empty() && type.dim(0) < 1) fail(op, "type has no rows, but row 0 is used when type_ids is empty");
  }
  if (!type_ids.empty()) {
    if (type.empty()) fail(op, "type_ids given without a type embedding table");
    need_indices(op, "type_ids", type_ids, T, type.dim(0), where);
  }
  need_f32_vector(op, "mean", mean, T);
  need_f32_vector(op, "rstd", rstd, T);
  need_act_vector(op, "gamma", gamma, H);
  if (!dword.empty()) need_f32_like(op, "dword", dword, word);
  if (!dpos.empty()) need_f32_like(op, "dpos", dpos, pos);
  if (!dtype.empty()) {
    if (type.empty()) fail(op, "dtype given without a type embedding table");
    need_f32_like(op, "dtype", dtype, type);
  }
  if (!dgamma.empty()) need_f32_vector(op, "dgamma", dgamma, H);
  if (!dbeta.empty()) need_f32_vector(op, "dbeta", dbeta, H);
  const std::pair<const char*, const TensorView*> grads[] = {
      {"dword", &dword}, {"dpos", &dpos}, {"dtype", &dtype}, {"dgamma", &dgamma}, {"dbeta", &dbeta}};
  const std::pair<const char*, const TensorView*> inputs[] = {
      {"dy", &dy},   {"word", &word}, {"pos", &pos},   {"type", &type},
      {"mean", &mean}, {"rstd", &rstd}, {"gamma", &gamma}};
  for (size_t i = 0; i < std::size(grads); ++i) {
    for (const auto& in : inputs) need_no_overlap(op, grads[i].first, *grads[i].second, in.first, *in.second);
    for (size_t j = i + 1; j < std::size(grads); ++j)
      need_no_overlap(op, grads[i].first, *grads[i].second, grads[j].first, *grads[j].second);
  }
  return {T, H};
}

RowsShape check_bias_gelu_train(const TensorView& x, const TensorView& pre, const TensorView& bias) {
  const char* op = "bias_gelu_train";
  const RowsShape s = check_bias_gelu(x, bias);
  need_rows(op, "pre", pre, s.T, s.H);
  if (pre.dtype != x.dtype) need_dtype(op, "pre", pre, DType::f32);
  need_no_overlap(op, "pre", pre, "x", x);
  need_no_overlap(op, "pre", pre, "bias", bias);
  return s;
}

RowsShape check_bias_gelu_backward(const TensorView& dx, const TensorView& dbias, const TensorView& dy,
                                   const TensorView& pre) {
  const char* op = "bias_gelu_backward";
  need(op, "dy", dy, 2);
  need_act(op, "dy", dy);
  const int64_t T = dy.dim(0), N = dy.dim(1);
  need_rows(op, "pre", pre, T, N);
  need_rows(op, "dx", dx, T, N);
  need_same_view_or_apart(op, "dx", dx, "dy", dy);
  need_no_overlap(op, "dx", dx, "pre", pre);
  if (!dbias.empty()) {
    need_f32_vector(op, "dbias", dbias, N);
    need_no_overlap(op, "dbias", dbias, "dx", dx);
    need_no_overlap(op, "dbias", dbias, "dy", dy);
    need_no_overlap(op, "dbias", dbias, "pre", pre);
  }
  return {T, N};
}

namespace {

// The backward of an activation computed from its output y (tanh, ReLU).
RowsShape check_backward_from_output(const char* op, const TensorView& dx, const TensorView& dy,
                                     const TensorView& y) {
  need(op, "dy", dy, 2);
  need_act(op, "dy", dy);
  const int64_t R = dy.dim(0), C = dy.dim(1);
  need_rows(op, "y", y, R, C);
  need_rows(op, "dx", dx, R, C);
  need_same_view_or_apart(op, "dx", dx, "dy", dy);
  need_same_view_or_apart(op, "dx", dx, "y", y);
  return {R, C};
}

}  // namespace

RowsShape check_relu_backward(const TensorView& dx, const TensorView& dy, const TensorView& y) {
  return check_backward_from_output("relu_backward", dx, dy, y);
}

RowsShape check_tanh_backward(const TensorView& dx, const TensorView& dy, const TensorView& y) {
  return check_backward_from_output("tanh_backward", dx, dy, y);
}

AttentionShape check_attention_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                                     const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                                     const Ops::AttentionDropout& dropout, IndexData where) {
  const char* op = "attention_train";
  need_dropout_p(op, dropout);
  const AttentionShape s = check_attention(out, qkv, cu_seqlens, heads, max_seqlen, window, where);
  need_dropout_rows(op, dropout, s.T, s.heads);
  need(op, "lse", lse, 2);
  need_dtype(op, "lse", lse, DType::f32);
  need_dim(op, "lse", lse, 0, s.T);
  need_dim(op, "lse", lse, 1, s.heads);
  need_no_overlap(op, "lse", lse, "out", out);
  need_no_overlap(op, "lse", lse, "qkv", qkv);
  return s;
}

AttentionShape check_attention_backward(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv,
                                        const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens,
                                        int heads, int max_seqlen, int window,
                                        const Ops::AttentionDropout& dropout, IndexData where) {
  const char* op = "attention_backward";
  need_dropout_p(op, dropout);
  const AttentionShape s = check_attention(out, qkv, cu_seqlens, heads, max_seqlen, window, where);
  need_dropout_rows(op, dropout, s.T, s.heads);
  need_rows(op, "dout", dout, s.T, s.heads * s.d);
  need(op, "lse", lse, 2);
  need_dtype(op, "lse", lse, DType::f32);
  need_dim(op, "lse", lse, 0, s.T);
  need_dim(op, "lse", lse, 1, s.heads);
  need_rows(op, "dqkv", dqkv, s.T, 3 * s.heads * s.d);
  for (const auto& [name, t] : {std::pair{"dout", &dout}, std::pair{"qkv", &qkv}, std::pair{"out", &out},
                                std::pair{"lse", &lse}, std::pair{"cu_seqlens", &cu_seqlens}})
    need_no_overlap(op, "dqkv", dqkv, name, *t);
  return s;
}

RowsShape check_gather_rows_backward(const TensorView& dh, const TensorView& dout, const TensorView& rows,
                                     IndexData where) {
  const char* op = "gather_rows_backward";
  need(op, "dh", dh, 2);
  need(op, "dout", dout, 2);
  need_act(op, "dh", dh);
  need_act(op, "dout", dout);
  const int64_t B = dout.dim(0), H = dh.dim(1);
  need_dim(op, "dout", dout, 1, H);
  need_indices(op, "rows", rows, B, dh.dim(0), where);
  need_no_overlap(op, "dh", dh, "dout", dout);
  need_no_overlap(op, "dh", dh, "rows", rows);
  return {B, H};
}

PoolShape check_pool_backward(const TensorView& dh, const TensorView& dout, const TensorView& h,
                              const TensorView& cu_seqlens, Pooling mode, IndexData where) {
  const char* op = "pool_backward";
  need(op, "dh", dh, 2);
  need_act(op, "dh", dh);
  const int64_t T = dh.dim(0), H = dh.dim(1);
  const int64_t B = need_cu_seqlens(op, cu_seqlens, T, where);
  need(op, "dout", dout, 2);
  need_dtype(op, "dout", dout, DType::f32);
  need_dim(op, "dout", dout, 0, B);
  need_dim(op, "dout", dout, 1, H);
  if (mode == Pooling::max && h.empty() && T * H > 0) fail(op, "max pooling needs h (the pooled input)");
  if (!h.empty()) {
    need_rows(op, "h", h, T, H);
    need_no_overlap(op, "dh", dh, "h", h);
  }
  need_no_overlap(op, "dh", dh, "dout", dout);
  need_no_overlap(op, "dh", dh, "cu_seqlens", cu_seqlens);
  return {T, B, H};
}

int64_t check_add(const TensorView& y, const TensorView& x) {
  const char* op = "add";
  need(op, "y", y, y.rank);
  need_act(op, "y", y);
  need(op, "x", x, x.rank);
  need_act(op, "x", x);
  if (x.rank != y.rank) fail(op, fmt::format("x is {}, expected the shape of y {}", describe(x), describe(y)));
  for (int i = 0; i < y.rank; ++i) need_dim(op, "x", x, i, y.dim(i));
  need_same_view_or_apart(op, "y", y, "x", x);
  return y.numel();
}

}  // namespace stoke
