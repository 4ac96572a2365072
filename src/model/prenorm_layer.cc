#include "model/prenorm_layer.h"

namespace stoke {

void prenorm_encoder_forward(const Ops& ops, const EncoderParams& p, const HfConfig& c, const SequenceInputs& in,
                             const PrenormViews& v) {
  const bool low = !v.xn_low.empty();
  const int heads = static_cast<int>(c.num_attention_heads);
  Ops::Rotary rope;
  rope.heads = 2 * heads;  // the q heads, then the k heads, of every qkv row
  rope.head_dim = static_cast<int>(c.head_dim());
  Ops::Glu geglu;
  geglu.act = Ops::Glu::Act::gelu_erf;
  geglu.act_on_second = false;  // Wi's output is [input | gate]: GELU(input) * gate
  ops.embed_layernorm(v.h, in.ids, in.positions, TensorView{}, p.word_embeddings, p.position_embeddings,
                      TensorView{}, p.emb_ln_gamma, p.emb_ln_beta, in.eps, low ? v.h_low : TensorView{});
  TensorView x = low ? v.h_low : v.h;  // layer 0's attention reads h itself (no attn_norm)
  const size_t L = p.layers.size();
  for (size_t l = 0; l < L; ++l) {
    const EncoderLayerParams& w = p.layers[l];
    const int window = c.attention_window[l];
    ops.linear(v.qkv, x, w.qkv_w, TensorView{}, Activation::none, Accumulate::no);
    ops.rotary(v.qkv, in.cu, window ? p.rope_local : p.rope_global, rope);
    if (in.key_lens.empty())
      ops.attention(v.ctx, v.qkv, in.cu, heads, in.max_seqlen, window);
    else  // a ColBERT query's expansion tokens are no keys
      ops.attention_keys(v.ctx, v.qkv, in.cu, in.key_lens, heads, in.max_seqlen, window);
    // h += attention, added by the GEMM itself (no pass of its own), then
    // xn = LN_mlp(h).
    ops.linear(v.h, v.ctx, w.attn_out_w, TensorView{}, Activation::none, Accumulate::yes);
    ops.residual_layernorm(v.xn, v.h, TensorView{}, w.ffn_ln_gamma, w.ffn_ln_beta, in.eps, v.xn_low);
    const TensorView xn_in = low ? v.xn_low : v.xn;
    ops.linear(v.gate, xn_in, w.ffn_in_w, TensorView{}, Activation::none, Accumulate::no);
    ops.glu(v.ffa, v.gate, geglu);
    ops.linear(v.h, v.ffa, w.ffn_out_w, TensorView{}, Activation::none, Accumulate::yes);  // h += mlp
    if (l + 1 == L) {  // the final LayerNorm, into h (nothing reads the sum after it)
      ops.residual_layernorm(v.h, v.h, TensorView{}, p.final_norm, p.zeros, in.eps, TensorView{});
    } else {  // the next layer's attn_norm
      const EncoderLayerParams& next = p.layers[l + 1];
      ops.residual_layernorm(v.xn, v.h, TensorView{}, next.attn_ln_gamma, next.attn_ln_beta, in.eps, v.xn_low);
      x = xn_in;
    }
  }
}

void prenorm_head_forward(const Ops& ops, const EncoderParams& p, const HfConfig& c, const TensorView& h,
                          const TensorView& cu, const TensorView& pooled, const TensorView& hidden,
                          const TensorView& zero_rows) {
  ops.pool(hidden, h, cu, c.classifier_mean_pooling ? PoolingMode::mean : PoolingMode::cls);
  ops.linear(pooled, hidden, p.head_dense_w, TensorView{}, Activation::gelu_erf, Accumulate::no);
  ops.residual_layernorm(hidden, pooled, zero_rows, p.head_norm, p.zeros, static_cast<float>(c.layer_norm_eps),
                         TensorView{});
}

}  // namespace stoke
