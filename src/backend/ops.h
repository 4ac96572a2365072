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
};

}  // namespace stoke
