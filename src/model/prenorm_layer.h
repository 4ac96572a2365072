// ModernBERT's encoder (Architecture::prenorm): the pre-norm layer sequence,
// as transformers' ModernBertModel computes it, and its classification head.
//
//   h = LN_emb(tok_embeddings[ids])
//   per layer l:  x = l == 0 ? h : LN_attn(h)            (layer 0 has no attn_norm)
//                 q, k, v = x Wqkv^T; q, k rotated (the layer's rope theta)
//                 h = h + attention(q, k, v; global, or local |i - j| <= w) Wo^T
//                 h = h + GeGLU(LN_mlp(h) Wi^T) Wo_mlp^T   (Wi = [input | gate], GELU on input)
//   out = LN_final(h)
// every LayerNorm without a bias, no linear biases. The residual stream h is
// f32; each block's output projection adds into it in the GEMM
// (Accumulate::yes: no residual-add pass), then the LayerNorm reads the sum
// and also writes its compute-dtype copy for the next GEMM.
#pragma once

#include "backend/backend.h"
#include "io/hf_config.h"
#include "model/encoder_params.h"
#include "model/layer_sequence.h"

namespace stoke {

// One batch's buffers (all (T, ·)).
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

// in.positions must be all 0 (the one-row zero position table, see
// EncoderParams). Leaves LN_final(h) in v.h.
void prenorm_encoder_forward(const Ops& ops, const EncoderParams& p, const HfConfig& c, const SequenceInputs& in,
                             const PrenormViews& v);

// The classification head's hidden state: hidden = LN_head(GELU(pooled
// W_dense^T)), pooled the first token's row or the mean of the sequence's
// rows (classifier_pooling). pooled, hidden: (B, H) f32 scratch / result;
// zero_rows (B, H) f32 zeros (the LayerNorm op normalises a sum; here + 0).
void prenorm_head_forward(const Ops& ops, const EncoderParams& p, const HfConfig& c, const TensorView& h,
                          const TensorView& cu, const TensorView& pooled, const TensorView& hidden,
                          const TensorView& zero_rows);

}  // namespace stoke
