#include "model/prenorm_family.h"

namespace stoke {

namespace {

Ops::Rotary prenorm_rope(const HfConfig& c) {
  Ops::Rotary rope;
  rope.heads = 2 * static_cast<int>(c.num_attention_heads);  // the q heads, then the k heads, of every qkv row
  rope.head_dim = static_cast<int>(c.head_dim());
  return rope;
}

Ops::Glu prenorm_geglu() {
  Ops::Glu g;
  g.act = Ops::Glu::Act::gelu_erf;
  g.act_on_second = false;  // Wi's output is [input | gate]: GELU(input) * gate
  return g;
}

}  // namespace

// ---- forward: one sequence, two forms (inference: train null)
void prenorm_encoder_forward(const Ops& ops, const EncoderParams& p, const HfConfig& c, const SequenceInputs& in,
                             const PrenormViews& v, const PrenormTraining* train) {
  const bool low = train ? train->drop.low : !v.xn_low.empty();
  const Ops::Rotary rope = prenorm_rope(c);
  const Ops::Glu geglu = prenorm_geglu();
  const size_t L = p.layers.size();
  // Embeddings: h = LN_emb(tok_embeddings[ids]) (inference: with its compute copy).
  if (train)
    ops.embed_layernorm_train(train->layers.empty() ? train->h_out : train->layers[0].h, train->em, train->er,
                              in.ids, in.positions, TensorView{}, p.word_embeddings, p.position_embeddings,
                              TensorView{}, p.emb_ln_gamma, p.emb_ln_beta, in.eps);
  else
    ops.embed_layernorm(v.h, in.ids, in.positions, TensorView{}, p.word_embeddings, p.position_embeddings,
                        TensorView{}, p.emb_ln_gamma, p.emb_ln_beta, in.eps, low ? v.h_low : TensorView{});
  TensorView x = low ? v.h_low : v.h;  // inference: layer 0's attention reads h itself (no attn_norm)
  for (size_t l = 0; l < L; ++l) {
    const EncoderLayerParams& w = p.layers[l];
    const PrenormLayerKeep* k = train ? &train->layers[l] : nullptr;
    const int window = c.attention_window[l];
    // Attention block: h + attention(rotary(x Wqkv^T)) Wo^T
    if (k) {  // layer 0: no attn_norm, h itself (its compute copy made here)
      x = l == 0 ? k->h : k->xa;
      if (low) {
        if (l == 0) ops.convert(k->x_low, k->h);
        x = l == 0 ? k->x_low : k->xa_low;
      }
    }
    const TensorView qkv = k ? k->qkv : v.qkv, ctx = k ? k->ctx : v.ctx;
    ops.linear(qkv, x, w.qkv_w, TensorView{}, Activation::none, Accumulate::no);
    ops.rotary(qkv, in.cu, window ? p.rope_local : p.rope_global, rope);
    if (k) {
      ops.attention_train(ctx, k->lse, qkv, in.cu, in.heads, in.max_seqlen, window,
                          Ops::AttentionDropout{train->drop.attention, train->drop.seed, train->drop.step,
                                                SequenceTraining::site(static_cast<int64_t>(l), 0),
                                                train->drop.token_offset});
    } else if (in.key_lens.empty()) {
      ops.attention(ctx, qkv, in.cu, in.heads, in.max_seqlen, window);
    } else {  // a ColBERT query's expansion tokens are no keys
      ops.attention_keys(ctx, qkv, in.cu, in.key_lens, in.heads, in.max_seqlen, window);
    }
    // ... then xm = LN_mlp(h + attention).
    TensorView xm_in;
    if (k) {  // ao = attention's projection, normalised with h, then ao = h + attention
      ops.linear(k->ao, ctx, w.attn_out_w, TensorView{}, Activation::none, Accumulate::no);
      ops.residual_layernorm_train(k->xm, k->mm, k->rm, k->ao, k->h, w.ffn_ln_gamma, w.ffn_ln_beta, in.eps);
      ops.add(k->ao, k->h);
      if (low) ops.convert(k->xm_low, k->xm);
      xm_in = low ? k->xm_low : k->xm;
    } else {  // h += attention, added by the GEMM itself (no pass of its own)
      ops.linear(v.h, ctx, w.attn_out_w, TensorView{}, Activation::none, Accumulate::yes);
      ops.residual_layernorm(v.xn, v.h, TensorView{}, w.ffn_ln_gamma, w.ffn_ln_beta, in.eps, v.xn_low);
      xm_in = low ? v.xn_low : v.xn;
    }
    // Feed-forward block: h + GeGLU(xm Wi^T) Wo_mlp^T
    const TensorView gate = k ? k->gate : v.gate, ffa = k ? k->ffa : v.ffa;
    ops.linear(gate, xm_in, w.ffn_in_w, TensorView{}, Activation::none, Accumulate::no);
    ops.glu(ffa, gate, geglu);
    // ... then the next layer's attn_norm, or the final LayerNorm after the last.
    const bool last = l + 1 == L;
    const TensorView gamma = last ? p.final_norm : p.layers[l + 1].attn_ln_gamma;
    const TensorView beta = last ? p.zeros : p.layers[l + 1].attn_ln_beta;
    if (k) {
      ops.linear(k->next, ffa, w.ffn_out_w, TensorView{}, Activation::none, Accumulate::no);
      if (last) {
        ops.residual_layernorm_train(train->h_out, train->mf, train->rf, k->next, k->ao, gamma, beta, in.eps);
      } else {
        const PrenormLayerKeep& n = train->layers[l + 1];
        ops.residual_layernorm_train(n.xa, n.ma, n.ra, k->next, k->ao, gamma, beta, in.eps);
        if (low) ops.convert(n.xa_low, n.xa);
      }
      ops.add(k->next, k->ao);  // h[l + 1] = h + attention + feed-forward
    } else {
      ops.linear(v.h, ffa, w.ffn_out_w, TensorView{}, Activation::none, Accumulate::yes);  // h += mlp
      if (last) {  // into h (nothing reads the sum after it)
        ops.residual_layernorm(v.h, v.h, TensorView{}, gamma, beta, in.eps, TensorView{});
      } else {
        ops.residual_layernorm(v.xn, v.h, TensorView{}, gamma, beta, in.eps, v.xn_low);
        x = xm_in;
      }
    }
  }
}

// ---- backward of the training form, mirroring it from the end
void prenorm_encoder_backward(const Ops& ops, const EncoderParams& p, const EncoderParams& g, const HfConfig& c,
                              const SequenceInputs& in, const PrenormTraining& keep, const PrenormGrads& d,
                              const std::function<void(int64_t)>& after_layer) {
  const bool low = keep.drop.low;
  const Ops::Rotary rope = prenorm_rope(c);
  const Ops::Glu geglu = prenorm_geglu();
  const size_t L = p.layers.size();
  const TensorView dh = d.dh, dx = d.dx, di = d.di, dqkv = d.dqkv, dgate = d.dgate;
  const TensorView h_last = L == 0 ? keep.h_out : keep.layers[L - 1].next;
  ops.layernorm_backward(dh, g.final_norm, TensorView{}, dx, h_last, TensorView{}, keep.mf, keep.rf, p.final_norm,
                         Accumulate::no);                                                              // d h[L]
  for (size_t li = L; li-- > 0;) {
    const int64_t l = static_cast<int64_t>(li);
    const EncoderLayerParams& w = p.layers[li];
    const EncoderLayerParams& gw = g.layers[li];
    const PrenormLayerKeep& k = keep.layers[li];
    // Feed-forward: h[l + 1] = ao + Wo_mlp GeGLU(Wi LN_mlp(ao))   (ao = h + attention)
    ops.linear_backward(di, gw.ffn_out_w, TensorView{}, dh, k.ffa, w.ffn_out_w, Accumulate::no);     // d ffa
    if (low) {  // glu_backward takes dout in x's dtype: the gate widened to f32 (exact), in place
      ops.convert(dgate, k.gate);
      ops.glu_backward(dgate, di, dgate, geglu);
    } else {
      ops.glu_backward(dgate, di, k.gate, geglu);                                                       // d gate
    }
    ops.linear_backward(dx, gw.ffn_in_w, TensorView{}, dgate, low ? k.xm_low : k.xm, w.ffn_in_w,
                        Accumulate::no);                                                               // d xm
    ops.layernorm_backward(dh, gw.ffn_ln_gamma, TensorView{}, dx, k.ao, TensorView{}, k.mm, k.rm, w.ffn_ln_gamma,
                           Accumulate::yes);                                                           // d ao
    // Attention: ao = h + Wo attention(rotary(Wqkv x)), x = h (layer 0) or LN_attn(h)
    ops.linear_backward(dx, gw.attn_out_w, TensorView{}, dh, k.ctx, w.attn_out_w, Accumulate::no);    // d ctx
    const int window = c.attention_window[li];
    ops.attention_backward(dqkv, dx, k.qkv, k.ctx, k.lse, in.cu, in.heads, in.max_seqlen, window,
                           Ops::AttentionDropout{keep.drop.attention, keep.drop.seed, keep.drop.step,
                                                 SequenceTraining::site(l, 0), keep.drop.token_offset});
    ops.rotary_backward(dqkv, in.cu, window ? p.rope_local : p.rope_global, rope);
    const TensorView x_in = li == 0 ? (low ? k.x_low : k.h) : (low ? k.xa_low : k.xa);
    if (li > 0) {
      ops.linear_backward(dx, gw.qkv_w, TensorView{}, dqkv, x_in, w.qkv_w, Accumulate::no);             // d x
      ops.layernorm_backward(dh, gw.attn_ln_gamma, TensorView{}, dx, k.h, TensorView{}, k.ma, k.ra, w.attn_ln_gamma,
                             Accumulate::yes);                                                         // d h[l]
    } else {  // layer 0 reads h itself: the branch's gradient adds into d h[0] in the GEMM
      ops.linear_backward(dh, gw.qkv_w, TensorView{}, dqkv, x_in, w.qkv_w, Accumulate::yes);            // d h[0]
    }
    if (after_layer) after_layer(l);
  }
  ops.embed_layernorm_backward(g.word_embeddings, TensorView{}, TensorView{}, g.emb_ln_gamma, TensorView{}, dh, in.ids,
                               in.positions, TensorView{}, p.word_embeddings, p.position_embeddings, TensorView{},
                               keep.em, keep.er, p.emb_ln_gamma);
}

// ---- head (inference; the training runner's loss_prenorm is its training form)
void prenorm_head_forward(const Ops& ops, const EncoderParams& p, const HfConfig& c, const TensorView& h,
                          const TensorView& cu, const TensorView& pooled, const TensorView& hidden,
                          const TensorView& zero_rows) {
  ops.pool(hidden, h, cu, c.classifier_mean_pooling ? PoolingMode::mean : PoolingMode::cls);
  ops.linear(pooled, hidden, p.head_dense_w, TensorView{}, Activation::gelu_erf, Accumulate::no);
  ops.residual_layernorm(hidden, pooled, zero_rows, p.head_norm, p.zeros, static_cast<float>(c.layer_norm_eps),
                         TensorView{});
}

int64_t prenorm_training_bytes_per_token(const HfConfig& c, DType dt) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, L = c.num_hidden_layers;
  const int64_t a = static_cast<int64_t>(dtype_size(dt)), low = dt == DType::f32 ? 0 : 1;
  // Two normalised copies, their statistics and Wi's output per layer; the
  // final norm's output and statistics; the zero position; d Wi's output.
  return L * (2 * H * 4 + low * 2 * H * a + 4 * 4 + 2 * I * a) + H * 4 + 2 * 4 + 4 + 2 * I * 4;
}

}  // namespace stoke
