#include "model/layer_sequence.h"

#include <cmath>

namespace stoke {

std::vector<int32_t> relative_position_buckets(int max_seqlen, int64_t num_buckets) {
  // As transformers computes it, in float32: n = -(j - i); half the buckets
  // for n < 0; exact buckets below half of those; logarithmic ones up to the
  // max distance 128, capped at the last.
  const int64_t half = num_buckets / 2, max_exact = half / 2;
  const float log_range = static_cast<float>(std::log(128.0 / static_cast<double>(max_exact)));
  std::vector<int32_t> out(static_cast<size_t>(2 * max_seqlen - 1));
  for (int64_t k = 0; k < static_cast<int64_t>(out.size()); ++k) {
    const int64_t n = -(k - (max_seqlen - 1));
    int64_t bucket = n < 0 ? half : 0;
    const int64_t a = n < 0 ? -n : n;
    if (a < max_exact) {
      bucket += a;
    } else {
      const float v = std::log(static_cast<float>(a) / static_cast<float>(max_exact)) / log_range *
                      static_cast<float>(half - max_exact);
      bucket += std::min<int64_t>(max_exact + static_cast<int64_t>(v), half - 1);
    }
    out[static_cast<size_t>(k)] = static_cast<int32_t>(bucket);
  }
  return out;
}

void relative_bias_forward(const Ops& ops, const TensorView& rel, const TensorView& table, const TensorView& buckets) {
  ops.gather_rows(rel, table, buckets);
}

void set_architecture_inputs(SequenceInputs& in, const HfConfig& c, const EncoderParams& p) {
  if (!p.rope_inv_freq.empty()) {
    in.inv_freq = p.rope_inv_freq;
    in.rope.heads = static_cast<int>(2 * c.num_attention_heads);  // the q heads, then the k heads
    in.rope.head_dim = static_cast<int>(c.hidden_size / c.num_attention_heads);
    in.rope.interleaved = c.rotary_interleaved;
    in.rope.scale = 1.0f;
  }
  if (c.arch->gated_ffn && c.arch->family != LayerFamily::decoder) {
    in.gated = true;
    in.glu.act = c.hidden_act == "silu" ? Ops::Glu::Act::silu : Ops::Glu::Act::gelu_erf;
    in.glu.act_on_second = c.arch->glu_act_on_second;
    in.glu_dropout = c.arch->glu_inner_dropout;
  }
}

void embeddings_forward(const Ops& ops, const EncoderParams& p, const SequenceInputs& in, const TensorView& e,
                        const TensorView& h, const TensorView& h_low, const TensorView& mean, const TensorView& rstd,
                        const SequenceTraining* train) {
  const bool project = !p.emb_proj_w.empty();  // ELECTRA: embeddings of size E, projected to H
  if (train) {
    ops.embed_layernorm_train(e, mean, rstd, in.ids, in.positions, in.types, p.word_embeddings,
                              p.position_embeddings, p.token_type_embeddings, p.emb_ln_gamma, p.emb_ln_beta, in.eps);
    if (train->hidden > 0) ops.dropout(e, e, train->hidden, train->seed, train->step, 0, train->token_offset);
  } else {
    ops.embed_layernorm(e, in.ids, in.positions, in.types, p.word_embeddings, p.position_embeddings,
                        p.token_type_embeddings, p.emb_ln_gamma, p.emb_ln_beta, in.eps,
                        project ? TensorView{} : h_low);
  }
  if (project) {
    ops.linear(h, e, p.emb_proj_w, p.emb_proj_b, Activation::none, Accumulate::no);
    if (!h_low.empty()) ops.convert(h_low, h);
  }
}

namespace {

// A layer GEMM: int8 when the weights are quantized (meta present), else the f32/bf16 linear.
void layer_linear(const Ops& ops, const TensorView& out, const TensorView& a, const TensorView& w,
                  const TensorView& meta, const TensorView& bias, Activation act) {
  if (meta.empty())
    ops.linear(out, a, w, bias, act, Accumulate::no);
  else
    ops.linear_int8(out, a, w, meta, bias, act);
}

}  // namespace

void layer_forward(const Ops& ops, const EncoderLayerParams& w, const SequenceInputs& in, const LayerViews& v,
                   int64_t l, const SequenceTraining* train) {
  const float ph = train ? train->hidden : 0.0f;
  // Attention block: hm = LN(dropout(attention(x) W_o) + x)
  if (train && train->low) ops.convert(v.x_in, v.x);
  layer_linear(ops, v.qkv, v.x_in, w.qkv_w, w.qkv_meta, w.qkv_b, Activation::none);
  if (!in.inv_freq.empty()) ops.rotary(v.qkv, in.cu, in.inv_freq, in.rope);  // q and k, in place
  const Ops::AttentionDropout drop =
      train ? Ops::AttentionDropout{train->attention, train->seed, train->step, SequenceTraining::site(l, 0),
                                    train->token_offset}
            : Ops::AttentionDropout{};
  if (!in.rel.empty()) {  // MPNet: scores + the relative-position bias
    if (train)
      ops.attention_relpos_train(v.ctx, v.lse, v.qkv, in.cu, in.heads, in.max_seqlen, in.rel, drop);
    else
      ops.attention_relpos(v.ctx, v.qkv, in.cu, in.heads, in.max_seqlen, in.rel);
  } else if (train) {
    ops.attention_train(v.ctx, v.lse, v.qkv, in.cu, in.heads, in.max_seqlen, 0, drop);
  } else if (!in.key_lens.empty()) {  // a ColBERT query's expansion tokens are no keys
    ops.attention_keys(v.ctx, v.qkv, in.cu, in.key_lens, in.heads, in.max_seqlen, 0);
  } else {
    ops.attention(v.ctx, v.qkv, in.cu, in.heads, in.max_seqlen, 0);
  }
  layer_linear(ops, v.ao, v.ctx, w.attn_out_w, w.attn_out_meta, w.attn_out_b, Activation::none);
  if (ph > 0)
    ops.dropout(v.ao, v.ao, ph, train->seed, train->step, SequenceTraining::site(l, 1), train->token_offset);
  if (train) {
    ops.residual_layernorm_train(v.hm, v.m1, v.r1, v.ao, v.x, w.attn_ln_gamma, w.attn_ln_beta, in.eps);
    if (train->low) ops.convert(v.hm_low, v.hm);
  } else {
    ops.residual_layernorm(v.hm, v.ao, v.x, w.attn_ln_gamma, w.attn_ln_beta, in.eps, v.hm_low);
  }
  // FFN block: out = LN(dropout(GELU(hm W_1 + b_1) W_2) + hm)
  const TensorView hm_in = v.hm_low.empty() ? v.hm : v.hm_low;
  if (in.gated) {  // both halves in one GEMM, then act(gate) * up (the backward reads ffgu)
    layer_linear(ops, v.ffgu, hm_in, w.ffn_in_w, w.ffn_in_meta, w.ffn_in_b, Activation::none);
    ops.glu(v.ffa, v.ffgu, in.glu);
    if (ph > 0 && in.glu_dropout)
      ops.dropout(v.ffa, v.ffa, ph, train->seed, train->step, SequenceTraining::glu_site(l), train->token_offset);
  } else if (train) {  // the backward reads GELU's pre-activation
    ops.linear(v.ffa, hm_in, w.ffn_in_w, TensorView{}, Activation::none, Accumulate::no);
    ops.bias_gelu_train(v.ffa, v.ffpre, w.ffn_in_b);
  } else {
    layer_linear(ops, v.ffa, hm_in, w.ffn_in_w, w.ffn_in_meta, w.ffn_in_b, Activation::gelu_erf);
  }
  layer_linear(ops, v.fo, v.ffa, w.ffn_out_w, w.ffn_out_meta, w.ffn_out_b, Activation::none);
  if (ph > 0)
    ops.dropout(v.fo, v.fo, ph, train->seed, train->step, SequenceTraining::site(l, 2), train->token_offset);
  if (train)
    ops.residual_layernorm_train(v.out, v.m2, v.r2, v.fo, v.hm, w.ffn_ln_gamma, w.ffn_ln_beta, in.eps);
  else
    ops.residual_layernorm(v.out, v.fo, v.hm, w.ffn_ln_gamma, w.ffn_ln_beta, in.eps, v.out_low);
}

}  // namespace stoke
