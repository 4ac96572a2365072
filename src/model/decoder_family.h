// The decoder family (LayerFamily::decoder: Qwen2, Qwen3): its layer
// sequence, written once, inference only (TrainableEncoder refuses
// decoders): the token embeddings gathered into the f32 residual stream h,
// then per layer
//   x = RMSNorm(h) * g_attn                      (residual_rmsnorm)
//   qkv = x W_qkv (+ b)                          grouped-query rows
//   q, k per-head RMSNorm (Qwen3), rotary on q and k by position in the sequence
//   h += attention_gqa(qkv) W_o                  causal unless the config says not
//   x = RMSNorm(h) * g_ffn
//   h += (silu(x W_gate) * (x W_up)) W_down      SwiGLU
// and h = RMSNorm(h) * g_final at the end: the last hidden state. Each
// residual add is fused into the next RMSNorm. GEMMs and attention run in the
// compute dtype; h, the norms' statistics and the projections into h are f32.
#pragma once

#include "backend/backend.h"
#include "model/encoder_params.h"

namespace stoke {

// One batch's device inputs. T = tokens, B = sequences.
struct DecoderInputs {
  TensorView ids;       // (T) i32
  TensorView cu;        // (B + 1) i32
  TensorView inv_freq;  // (head_dim / 2) f32 rotary frequencies (model/rotary_frequencies.h)
  int max_seqlen = 0;
  int heads = 0, kv_heads = 0, head_dim = 0;
  float eps = 0;
  bool causal = true;
};

// The batch's buffers (all (T, ·)).
struct DecoderViews {
  TensorView h;    // (T, H) f32 residual stream; the last hidden state at the end
  TensorView x;    // (T, H) the normalised GEMM input, compute dtype
  TensorView qkv;  // (T, (heads + 2 kv_heads) d)
  TensorView ctx;  // (T, heads d)
  TensorView tmp;  // (T, H) f32 projections into the residual stream
  TensorView gate_up;  // (T, 2I) the fused gate | up GEMM's output
  TensorView act;      // (T, I) silu(gate) * up, compute dtype
};

void decoder_forward(const Ops& ops, const EncoderParams& p, const DecoderInputs& in, const DecoderViews& v);

}  // namespace stoke
