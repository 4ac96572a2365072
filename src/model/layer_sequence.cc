#include "model/layer_sequence.h"

namespace stoke {

void embeddings_forward(const Ops& ops, const EncoderParams& p, const SequenceInputs& in, const TensorView& e,
                        const TensorView& h, const TensorView& h_low, const TensorView& mean, const TensorView& rstd,
                        const SequenceTraining* train) {
  const bool project = !p.emb_proj_w.empty();  // ELECTRA: embeddings of size E, projected to H
  if (train) {
    ops.embed_layernorm_train(e, mean, rstd, in.ids, in.positions, in.types, p.word_embeddings,
                              p.position_embeddings, p.token_type_embeddings, p.emb_ln_gamma, p.emb_ln_beta, in.eps);
    if (train->hidden > 0) ops.dropout(e, e, train->hidden, train->seed, train->step, 0);
  } else {
    ops.embed_layernorm(e, in.ids, in.positions, in.types, p.word_embeddings, p.position_embeddings,
                        p.token_type_embeddings, p.emb_ln_gamma, p.emb_ln_beta, in.eps,
                        project ? TensorView{} : h_low);
  }
  if (project) {
    ops.linear(h, e, p.emb_proj_w, p.emb_proj_b, Activation::none);
    if (!h_low.empty()) ops.convert(h_low, h);
  }
}

void layer_forward(const Ops& ops, const EncoderLayerParams& w, const SequenceInputs& in, const LayerViews& v,
                   int64_t l, const SequenceTraining* train) {
  const float ph = train ? train->hidden : 0.0f;
  // Attention block: hm = LN(dropout(attention(x) W_o) + x)
  if (train && train->low) ops.convert(v.x_in, v.x);
  ops.linear(v.qkv, v.x_in, w.qkv_w, w.qkv_b, Activation::none);
  if (train)
    ops.attention_train(v.ctx, v.lse, v.qkv, in.cu, in.heads, in.max_seqlen,
                        Ops::AttentionDropout{train->attention, train->seed, train->step, SequenceTraining::site(l, 0)});
  else
    ops.attention(v.ctx, v.qkv, in.cu, in.heads, in.max_seqlen);
  ops.linear(v.ao, v.ctx, w.attn_out_w, w.attn_out_b, Activation::none);
  if (ph > 0) ops.dropout(v.ao, v.ao, ph, train->seed, train->step, SequenceTraining::site(l, 1));
  if (train) {
    ops.residual_layernorm_train(v.hm, v.m1, v.r1, v.ao, v.x, w.attn_ln_gamma, w.attn_ln_beta, in.eps);
    if (train->low) ops.convert(v.hm_low, v.hm);
  } else {
    ops.residual_layernorm(v.hm, v.ao, v.x, w.attn_ln_gamma, w.attn_ln_beta, in.eps, v.hm_low);
  }
  // FFN block: out = LN(dropout(GELU(hm W_1 + b_1) W_2) + hm)
  const TensorView hm_in = v.hm_low.empty() ? v.hm : v.hm_low;
  if (train) {  // the backward reads GELU's pre-activation
    ops.linear(v.ffa, hm_in, w.ffn_in_w, TensorView{}, Activation::none);
    ops.bias_gelu_train(v.ffa, v.ffpre, w.ffn_in_b);
  } else {
    ops.linear(v.ffa, hm_in, w.ffn_in_w, w.ffn_in_b, Activation::gelu_erf);
  }
  ops.linear(v.fo, v.ffa, w.ffn_out_w, w.ffn_out_b, Activation::none);
  if (ph > 0) ops.dropout(v.fo, v.fo, ph, train->seed, train->step, SequenceTraining::site(l, 2));
  if (train)
    ops.residual_layernorm_train(v.out, v.m2, v.r2, v.fo, v.hm, w.ffn_ln_gamma, w.ffn_ln_beta, in.eps);
  else
    ops.residual_layernorm(v.out, v.fo, v.hm, w.ffn_ln_gamma, w.ffn_ln_beta, in.eps, v.out_low);
}

}  // namespace stoke
