#include "model/decoder_family.h"

namespace stoke {

void decoder_forward(const Ops& ops, const EncoderParams& p, const DecoderInputs& in, const DecoderViews& v) {
  ops.gather_rows(v.h, p.word_embeddings, in.ids);
  const Ops::Rotary rope{in.heads + in.kv_heads, in.head_dim, false, 1.0f};  // q and k heads, NeoX rotate-half
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const EncoderLayerParams& w = p.layers[l];
    // h += the previous layer's FFN output (none before the first), x = RMSNorm(h).
    ops.residual_rmsnorm(v.h, v.x, l == 0 ? TensorView{} : v.tmp, w.attn_ln_gamma, in.eps);
    ops.linear(v.qkv, v.x, w.qkv_w, w.qkv_b, Activation::none, Accumulate::no);
    if (!w.q_norm.empty()) ops.head_rmsnorm(v.qkv, w.q_norm, w.k_norm, in.heads, in.kv_heads, in.eps);
    ops.rotary(v.qkv, in.cu, in.inv_freq, rope);
    ops.attention_gqa(v.ctx, v.qkv, in.cu, in.heads, in.kv_heads, in.causal, in.max_seqlen);
    ops.linear(v.tmp, v.ctx, w.attn_out_w, w.attn_out_b, Activation::none, Accumulate::no);
    ops.residual_rmsnorm(v.h, v.x, v.tmp, w.ffn_ln_gamma, in.eps);
    ops.linear(v.gate_up, v.x, w.ffn_in_w, w.ffn_in_b, Activation::none, Accumulate::no);  // [gate | up]
    ops.glu(v.act, v.gate_up, Ops::Glu{Ops::Glu::Act::silu, false});  // SwiGLU: silu(gate) * up
    ops.linear(v.tmp, v.act, w.ffn_out_w, w.ffn_out_b, Activation::none, Accumulate::no);
  }
  // h += the last FFN output, then the final RMSNorm in place: the last hidden state.
  ops.residual_rmsnorm(v.h, v.h, p.layers.empty() ? TensorView{} : v.tmp, p.final_norm, in.eps);
}

}  // namespace stoke
