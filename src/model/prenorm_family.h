// The pre-norm encoder family (LayerFamily::prenorm_encoder: ModernBERT),
// as transformers' ModernBertModel computes it: its layer sequence written
// once, in its inference and its training form, the training backward beside
// it, and its classification head.
//
//   h = LN_emb(tok_embeddings[ids])
//   per layer l:  x = l == 0 ? h : LN_attn(h)            (layer 0 has no attn_norm)
//                 q, k, v = x Wqkv^T; q, k rotated (the layer's rope theta)
//                 h = h + attention(q, k, v; global, or local |i - j| <= w) Wo^T
//                 h = h + GeGLU(LN_mlp(h) Wi^T) Wo_mlp^T   (Wi = [input | gate], GELU on input)
//   out = LN_final(h)
// every LayerNorm without a bias, no linear biases.
//
// The two forms differ only in what they keep, as model/layer_sequence.h's
// do. Inference (no PrenormTraining) keeps the f32 residual stream h in one
// buffer: each block's output projection adds into it in the GEMM
// (Accumulate::yes: no residual-add pass), then the LayerNorm reads the sum
// and also writes its compute-dtype copy for the next GEMM. Training keeps
// every layer's activations: each block's output projection goes to its own
// buffer, the LayerNorm normalises (projection + h) keeping its statistics,
// then h is added into the projection's buffer (ao becomes h + attention,
// h[l + 1] the layer's output sum), so each LayerNorm's backward reads its
// input sum as one tensor.
#pragma once

#include <functional>
#include <vector>

#include "backend/backend.h"
#include "io/hf_config.h"
#include "model/encoder_params.h"
#include "model/layer_sequence.h"

namespace stoke {

// Inference: one batch's buffers (all (T, ·)), reused by every layer.
struct PrenormViews {
  TensorView h;       // (T, H) f32 residual stream (the output projections add into it); LN_final's output at the end
  TensorView h_low;   // (T, H) the embeddings' output in the compute dtype (layer 0's GEMM input); empty in f32
  TensorView xn;      // (T, H) f32 a block's normalised input
  TensorView xn_low;  // (T, H) the same in the compute dtype; empty in f32
  TensorView qkv;     // (T, 3H) compute dtype
  TensorView ctx;     // (T, H) compute dtype
  TensorView gate;    // (T, 2I) compute dtype: Wi's output
  TensorView ffa;     // (T, I) compute dtype: the GeGLU's output
};

// Training: what the backward reads, per layer (all (T, ·)).
struct PrenormLayerKeep {
  TensorView h;               // (T, H) f32 h[l], the layer's input
  TensorView x_low;           // (T, H) layer 0: h in the compute dtype; empty in f32
  TensorView qkv, ctx;        // (T, 3H), (T, H) compute dtype
  TensorView lse;             // (T, heads) f32 attention's log-sum-exp
  TensorView ao;              // (T, H) f32 attention's projection, then h + attention
  TensorView xa, xa_low;      // (T, H) attn_norm's output (layers > 0), f32 and compute dtype (empty in f32)
  TensorView ma, ra;          // (T) f32 its statistics
  TensorView xm, xm_low;      // (T, H) mlp_norm's output
  TensorView mm, rm;          // (T) f32
  TensorView gate;            // (T, 2I) compute dtype: Wi's output
  TensorView ffa;             // (T, I) compute dtype: the GeGLU's output
  TensorView next;            // (T, H) f32 h[l + 1]: the FFN projection, then the layer's output sum
};
struct PrenormTraining {
  SequenceTraining drop;               // attention dropout keys (ModernBERT trains its layers without dropout), low
  TensorView em, er;                   // (T) f32 the embedding LayerNorm's statistics
  std::vector<PrenormLayerKeep> layers;
  TensorView h_out, mf, rf;            // (T, H) f32 LN_final's output, (T) its statistics
};

// in.positions must be all 0 (the one-row zero position table, see
// EncoderParams). Inference (train null): leaves LN_final(h) in v.h.
// Training: leaves it in train->h_out (v unused).
void prenorm_encoder_forward(const Ops& ops, const EncoderParams& p, const HfConfig& c, const SequenceInputs& in,
                             const PrenormViews& v, const PrenormTraining* train);

// The training gradients' buffers (f32, all (T, ·)).
struct PrenormGrads {
  TensorView dh;     // (T, H) d h[l] as the backward walks down; d h[0] at the end
  TensorView dx;     // (T, H) d h_out on entry (the head's or the pooling's backward writes it), then scratch
  TensorView di;     // (T, I)
  TensorView dqkv;   // (T, 3H)
  TensorView dgate;  // (T, 2I)
};

// The backward of prenorm_encoder_forward's training form, from d h_out (in
// d.dx): the final norm, the layers from the last down (after_layer(l) after
// each, when set), the embeddings. Parameter gradients ADD to g.
void prenorm_encoder_backward(const Ops& ops, const EncoderParams& p, const EncoderParams& g, const HfConfig& c,
                              const SequenceInputs& in, const PrenormTraining& keep, const PrenormGrads& d,
                              const std::function<void(int64_t)>& after_layer);

// The classification head's hidden state (inference): hidden =
// LN_head(GELU(pooled W_dense^T)), pooled the first token's row or the mean
// of the sequence's rows (classifier_pooling). pooled, hidden: (B, H) f32
// scratch / result; zero_rows (B, H) f32 zeros (the LayerNorm op normalises a
// sum; here + 0).
void prenorm_head_forward(const Ops& ops, const EncoderParams& p, const HfConfig& c, const TensorView& h,
                          const TensorView& cu, const TensorView& pooled, const TensorView& hidden,
                          const TensorView& zero_rows);

// Device bytes per token of the training workspace beyond the post-LN slabs
// every family shares (EncoderTrainingRunner::bytes_per_token).
int64_t prenorm_training_bytes_per_token(const HfConfig& c, DType dtype);

}  // namespace stoke
