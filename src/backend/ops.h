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

#include <cstdint>

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
  // type_ids may be empty (all zero). out_low (may be empty): a second copy
  // of out in another activation dtype, exactly convert(out_low, out) — the
  // next GEMM's input written in the same pass (no convert pass).
  virtual void embed_layernorm(const TensorView& out, const TensorView& ids, const TensorView& positions,
                               const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                               const TensorView& type, const TensorView& gamma, const TensorView& beta, float eps,
                               const TensorView& out_low) const = 0;

  // out[T,H] = LayerNorm(x + residual) * gamma + beta; out may alias x or
  // residual. out_low (may be empty) as for embed_layernorm.
  virtual void residual_layernorm(const TensorView& out, const TensorView& x, const TensorView& residual,
                                  const TensorView& gamma, const TensorView& beta, float eps,
                                  const TensorView& out_low) const = 0;

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

  // Dropout on the attention probabilities (BERT's attention_probs_dropout):
  // out = (P * mask / (1 - p)) · v, the mask drawn as the dropout op draws
  // (core/philox.h) with element index (t * heads + h) * max_seqlen + j for
  // query row t (packed), head h and key j (0-based within its sequence).
  // p in [0, 1] (else an error): p = 0 is no dropout; p = 1 gives zero out
  // and gradients.
  struct AttentionDropout {
    float p = 0.0f;
    uint64_t seed = 0;
    uint32_t step = 0;
    uint32_t tensor_id = 0;
  };

  // attention that also writes lse[T, heads] (f32): per token and head, the
  // log of the softmax denominator, log sum_j exp(q·k_j / sqrt(d)) (before
  // dropout, which does not change the denominator).
  virtual void attention_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                               const TensorView& cu_seqlens, int heads, int max_seqlen,
                               const AttentionDropout& dropout) const = 0;

  // Backward of attention: dqkv[T, 3*heads*d] from dout[T, heads*d] and the
  // forward's qkv, out and lse. P is recomputed as exp(q·k/sqrt(d) - lse);
  // dV = P^T dout, dP = dout V^T, dS = P * (dP - rowsum(dout * out)),
  // dQ = dS K / sqrt(d), dK = dS^T Q / sqrt(d); per sequence and head. With
  // dropout (the forward's key), dV = Pd^T dout and dP = (dout V^T) * mask / (1 - p)
  // for Pd = P * mask / (1 - p); rowsum(dout * out) is unchanged.
  virtual void attention_backward(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv,
                                  const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens,
                                  int heads, int max_seqlen, const AttentionDropout& dropout) const = 0;

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

  // y += x element-wise (same shape; activations of any dtype, added in f32,
  // rounded once to y's dtype): where a gradient reaches one tensor along two
  // paths — the residual and the branch of a post-LN block.
  virtual void add(const TensorView& y, const TensorView& x) const = 0;
  // --- end of training ops
  // --- training: dropout, loss, optimizer
  // All of these run on the stream without a host read: losses and metrics
  // accumulate in device buffers, and gradient clipping reads its scale from
  // device memory. Parameters, gradients and optimizer state are f32.

  // out = x * mask / (1 - p) element-wise (x, out: activations of one dtype,
  // same shape; out may be x). mask[i] = (uniform_i >= p), uniform_i drawn by
  // Philox4x32-10 from (seed, step, tensor_id, flat index i) in the layout of
  // core/philox.h, so every backend draws the same mask. The product is one
  // f32 multiply by the f32 scale 1 / (1 - p), rounded once to out's dtype.
  // p in [0, 1]: p = 0 copies x; p = 1 writes zeros.
  virtual void dropout(const TensorView& out, const TensorView& x, float p, uint64_t seed, uint32_t step,
                       uint32_t tensor_id) const = 0;
  // dx = dy * mask / (1 - p) with the mask of the forward call with the same
  // (p, seed, step, tensor_id) and shape, recomputed (no mask is stored).
  virtual void dropout_backward(const TensorView& dx, const TensorView& dy, float p, uint64_t seed, uint32_t step,
                                uint32_t tensor_id) const = 0;

  // Softmax cross-entropy, forward and backward in one pass, as
  // torch.nn.functional.cross_entropy(logits, labels, label_smoothing=eps):
  //   loss_b = (1 - eps) * -log p[b, labels[b]] + eps * mean_c(-log p[b, c])
  //   dlogits[b, c] = scale * (p[b, c] - (1 - eps) * [c == labels[b]] - eps / C)
  // logits[B,C] f32, labels[B] i32 in [0, C), dlogits[B,C] f32 (written; may be
  // logits itself, or empty for evaluation). scale is the loss's weight: 1/B
  // for torch's mean, 1/(K*B) for K accumulated micro-batches of B.
  // metrics[3] f64 (may be empty) ACCUMULATES {sum_b loss_b (unscaled), number
  // of rows whose argmax (first maximum) is the label, B}; the host reads it
  // at logging steps only. f64 keeps the counts exact and the sums precise
  // over a whole epoch.
  virtual void cross_entropy(const TensorView& dlogits, const TensorView& metrics, const TensorView& logits,
                             const TensorView& labels, float label_smoothing, float scale) const = 0;
  // Regression (num_labels == 1), torch's MSELoss: loss_b = (pred[b] -
  // target[b])^2, dpred[b] = scale * 2 * (pred[b] - target[b]). pred[B,1] f32,
  // target[B] f32, dpred[B,1] f32 (may be pred, or empty). metrics[3] f64 (may
  // be empty) accumulates {sum_b loss_b, 0, B}.
  virtual void mse_loss(const TensorView& dpred, const TensorView& metrics, const TensorView& pred,
                        const TensorView& target, float scale) const = 0;

  // out[1] (f64 or f32) += sum_i x_i^2 over x of any shape (f32, bf16, f16),
  // summed in double in a fixed order (the same for any thread count). Zero
  // out first (an enqueued copy) to start a new sum.
  virtual void sum_squares(const TensorView& out, const TensorView& x) const = 0;
  // scale[1] f32 = min(1, max_norm / (sqrt(sumsq[0]) + 1e-6)), torch's
  // clip_grad_norm_ coefficient (norm and coefficient in f32 as torch has
  // them; a NaN norm gives a NaN scale, as in torch). sumsq[1] f64 or f32.
  virtual void clip_scale(const TensorView& scale, const TensorView& sumsq, float max_norm) const = 0;

  // One AdamW step of a parameter group, torch.optim.AdamW semantics. Host
  // doubles, as Python floats are in torch: the derived coefficients (1 -
  // beta1, 1 - lr * weight_decay, lr / (1 - beta1^t), ...) are formed in
  // double and rounded to f32 once, as torch's CPU kernels receive them.
  struct AdamWStep {
    int64_t step = 1;  // t, 1-based: the number of this step (bias corrections 1 - beta^t)
    double lr = 0.0;
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    double weight_decay = 0.0;  // decoupled: p -= lr * weight_decay * p where decay applies
  };
  // p, g, m, v: f32 of equal element count (flat buffers; any shape). For
  // every element, with s = grad_scale[0] (f32 on device; empty = 1):
  //   g' = s * g
  //   p  = p * (1 - lr * weight_decay)           only where decay applies
  //   m  = beta1 * m + (1 - beta1) * g'    (as torch: m + (1 - beta1) * (g' - m))
  //   v  = beta2 * v + (1 - beta2) * g'^2
  //   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
  // decay_ranges[R,2] i64: sorted, disjoint [begin, end) element ranges where
  // weight decay applies (the per-tensor decay flags of the group, merged); an
  // unset view (TensorView{}, rank 0) = decay applies everywhere, R = 0 rows =
  // nowhere. g is read, never written.
  virtual void adamw(const TensorView& p, const TensorView& g, const TensorView& m, const TensorView& v,
                     const TensorView& decay_ranges, const TensorView& grad_scale, const AdamWStep& hp) const = 0;
};

}  // namespace stoke
