// The op table: every computation the encoder needs, on device memory
// described by TensorViews. A backend's ops are ENQUEUED on its stream: a call
// returns at once and the work runs in order with the backend's copies and
// events. The model code calls only these, so it runs unchanged on any backend.
//
// Conventions for all ops:
// - activations are f32, bf16 or f16 (all of one call's activations share a
//   dtype); weights and biases are f32 or the activation dtype; LayerNorm and
//   softmax statistics, GEMM accumulation and pooling sums are in f32;
// - token-wise tensors are packed: [T, ...] with T = total real tokens of the
//   batch, sequence b owning rows [cu_seqlens[b], cu_seqlens[b+1]); no padding;
// - index tensors (ids, positions, type ids, cu_seqlens, rows) are int32.
#pragma once

#include "core/tensor.h"

namespace stoke {

enum class Activation { none, gelu_erf, tanh };
enum class PoolingMode { cls, mean, max, mean_sqrt_len, lasttoken };

class Ops {
 public:
  virtual ~Ops() = default;

  // out[M,N] = act(a[M,K] · w[N,K]^T + bias[N]); w in nn.Linear layout
  // ([out_features, in_features]); bias may be empty. out is in a's dtype or
  // f32 (a low-precision GEMM writing into the f32 residual stream).
  virtual void linear(const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias,
                      Activation act) const = 0;

  // out[T,H] = LayerNorm(word[ids[t]] + pos[positions[t]] + type[type_ids[t]]) * gamma + beta.
  // type_ids may be empty (all zero).
  virtual void embed_layernorm(const TensorView& out, const TensorView& ids, const TensorView& positions,
                               const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                               const TensorView& type, const TensorView& gamma, const TensorView& beta,
                               float eps) const = 0;

  // out[T,H] = LayerNorm(x + residual) * gamma + beta; out may alias x or residual.
  virtual void residual_layernorm(const TensorView& out, const TensorView& x, const TensorView& residual,
                                  const TensorView& gamma, const TensorView& beta, float eps) const = 0;

  // x[T,N] = GELU_erf(x + bias[N]), in place (for GEMMs without a fused epilogue).
  virtual void bias_gelu(const TensorView& x, const TensorView& bias) const = 0;

  // Variable-length multi-head self-attention over packed sequences.
  // qkv[T, 3*heads*d] holds [q | k | v] per token (heads of d columns each);
  // out[T, heads*d] = softmax(q·k^T / sqrt(d)) · v within each sequence.
  virtual void attention(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                         int max_seqlen) const = 0;

  // out[B,H] (f32) pooled from h[T,H] per sequence: cls (first token), mean,
  // max, mean_sqrt_len (sum / sqrt(len)), lasttoken.
  virtual void pool(const TensorView& out, const TensorView& h, const TensorView& cu_seqlens,
                    PoolingMode mode) const = 0;

  // x[B,D] (f32) rows scaled to unit L2 norm: x / max(||x||, 1e-12).
  virtual void l2_normalize(const TensorView& x) const = 0;

  // out[B,H] = h[rows[b]] (e.g. the first token of every sequence).
  virtual void gather_rows(const TensorView& out, const TensorView& h, const TensorView& rows) const = 0;

  // out[B,D] = in[B, 0:D] (Matryoshka truncation of pooled vectors).
  virtual void slice_columns(const TensorView& out, const TensorView& in) const = 0;

  // out = in converted element-wise between f32, bf16 and f16 (same shape).
  virtual void convert(const TensorView& out, const TensorView& in) const = 0;

  // --- training: forward variants that keep what backward needs, and backward ops
  // Gradients are named d<thing> after the tensor they are the gradient of.
  // - Activation gradients (dx, da, dqkv, dh) are WRITTEN (=), in the dtype of
  //   their tensor or f32; gather_rows_backward alone adds (+=, see there).
  // - Parameter gradients (dw, db, dbias, dgamma, dbeta, dword, dpos, dtype)
  //   are f32 and ACCUMULATED (+=), so micro-batches of one optimizer step add
  //   up in place; the trainer zeroes them once per step. Any of them may be
  //   empty when that parameter is frozen or absent.
  // - No atomics, no float races: a backward pass is bitwise reproducible
  //   run to run (at a fixed thread count; the CPU's column sums and
  //   embedding scatter-adds do not depend on it at all, its GEMMs may).
  // - Saved statistics (mean, rstd, lse) are f32.

  // Given dy[M,N] and the forward's a[M,K], w[N,K] (out = a·w^T + bias):
  // da[M,K] = dy·w (da may be empty: the first layer's input needs none),
  // dw[N,K] += dy^T·a, db[N] += column sums of dy. The forward's activation
  // is not undone here: pass dy already multiplied by its derivative
  // (bias_gelu_backward, tanh_backward).
  virtual void linear_backward(const TensorView& da, const TensorView& dw, const TensorView& db, const TensorView& dy,
                               const TensorView& a, const TensorView& w) const = 0;

  // residual_layernorm that also writes mean[T] and rstd[T] (f32) of the row
  // x + residual (rstd = 1 / sqrt(biased variance + eps)).
  virtual void residual_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                                        const TensorView& x, const TensorView& residual, const TensorView& gamma,
                                        const TensorView& beta, float eps) const = 0;

  // Backward of out = LayerNorm(s) * gamma + beta with s = x + residual
  // (residual may be empty: s = x), from the forward's mean and rstd:
  // dx[T,H] = ds (the gradient of x and of residual alike; dx may alias dy),
  // dgamma[H] += sum_t dy * s_hat, dbeta[H] += sum_t dy.
  virtual void layernorm_backward(const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta,
                                  const TensorView& dy, const TensorView& x, const TensorView& residual,
                                  const TensorView& mean, const TensorView& rstd, const TensorView& gamma) const = 0;

  // embed_layernorm that also writes mean[T] and rstd[T] (f32).
  virtual void embed_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                                     const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
                                     const TensorView& word, const TensorView& pos, const TensorView& type,
                                     const TensorView& gamma, const TensorView& beta, float eps) const = 0;

  // Backward of embed_layernorm_train: the LayerNorm part as layernorm_backward
  // (the summed embedding row is recomputed from the tables), then the row
  // gradient is scatter-added: dword[ids[t]] += dx[t], dpos[positions[t]] +=
  // dx[t], dtype[type_ids[t] or 0] += dx[t] (all f32, any may be empty).
  // Tokens that share a row are summed in token order.
  virtual void embed_layernorm_backward(const TensorView& dword, const TensorView& dpos, const TensorView& dtype,
                                        const TensorView& dgamma, const TensorView& dbeta, const TensorView& dy,
                                        const TensorView& ids, const TensorView& positions,
                                        const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                                        const TensorView& type, const TensorView& mean, const TensorView& rstd,
                                        const TensorView& gamma) const = 0;

  // bias_gelu that keeps the pre-activation: pre[T,N] = x + bias (bias may be
  // empty), then x = GELU_erf(pre) in place. pre has x's dtype or f32.
  virtual void bias_gelu_train(const TensorView& x, const TensorView& pre, const TensorView& bias) const = 0;

  // dx[T,N] = dy * GELU_erf'(pre), GELU'(u) = Phi(u) + u phi(u);
  // dbias[N] += column sums of dx (dbias may be empty). dx may alias dy.
  virtual void bias_gelu_backward(const TensorView& dx, const TensorView& dbias, const TensorView& dy,
                                  const TensorView& pre) const = 0;

  // dx = dy * (1 - y^2) for y = tanh(u), given the output y (the pooler's and
  // the classification head's activation). dx may alias dy.
  virtual void tanh_backward(const TensorView& dx, const TensorView& dy, const TensorView& y) const = 0;

  // attention that also writes lse[T, heads] (f32): per token and head, the
  // log of the softmax denominator, log sum_j exp(q·k_j / sqrt(d)).
  virtual void attention_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                               const TensorView& cu_seqlens, int heads, int max_seqlen) const = 0;

  // Backward of attention: dqkv[T, 3*heads*d] from dout[T, heads*d] and the
  // forward's qkv, out and lse. P is recomputed as exp(q·k/sqrt(d) - lse);
  // dV = P^T dout, dP = dout V^T, dS = P * (dP - rowsum(dout * out)),
  // dQ = dS K / sqrt(d), dK = dS^T Q / sqrt(d); per sequence and head.
  virtual void attention_backward(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv,
                                  const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens,
                                  int heads, int max_seqlen) const = 0;

  // Backward of gather_rows: dh[rows[b]] += dout[b]. ADDS: the caller zeroes
  // dh (or passes the gradient the rest of the graph already wrote there).
  // Repeated rows add up in b order.
  virtual void gather_rows_backward(const TensorView& dh, const TensorView& dout, const TensorView& rows) const = 0;

  // Backward of pool: dh[T,H] WRITTEN in full (tokens the pooling did not read
  // get 0) from dout[B,H] (f32). h is read by max only (the gradient goes to
  // the first token holding the maximum, per column); it may be empty for
  // the other modes.
  virtual void pool_backward(const TensorView& dh, const TensorView& dout, const TensorView& h,
                             const TensorView& cu_seqlens, PoolingMode mode) const = 0;
  // --- end of training ops
};

}  // namespace stoke
