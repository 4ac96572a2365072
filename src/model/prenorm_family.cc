#include "model/prenorm_family.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "model/rotary_frequencies.h"

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

// ---- head (inference; PrenormTrainer::loss below is its training form)
void prenorm_head_forward(const Ops& ops, const EncoderParams& p, const HfConfig& c, const TensorView& h,
                          const TensorView& cu, const TensorView& pooled, const TensorView& hidden,
                          const TensorView& zero_rows) {
  ops.pool(hidden, h, cu, c.classifier_mean_pooling ? Pooling::mean : Pooling::cls);
  ops.linear(pooled, hidden, p.head_dense_w, TensorView{}, Activation::gelu_erf, Accumulate::no);
  ops.residual_layernorm(hidden, pooled, zero_rows, p.head_norm, p.zeros, static_cast<float>(c.layer_norm_eps),
                         TensorView{});
}

// ---- inference: the workspace
PrenormBuffers::PrenormBuffers(Backend& backend, const HfConfig& c, DType dt, size_t T, size_t B)
    : dt_(dt), H_(c.hidden_size), I_(c.intermediate_size) {
  const size_t H = static_cast<size_t>(H_), I = static_cast<size_t>(I_), act = dtype_size(dt);
  qkv_ = backend.allocate(T * 3 * H * act);  // (T, 3H)
  ctx_ = backend.allocate(T * H * act);      // (T, H)
  ffn_ = backend.allocate(T * I * act);      // (T, I) the GeGLU's output
  xn_ = backend.allocate(T * H * 4);         // (T, H) f32 a block's normalised input
  if (dt != DType::f32) xn_low_ = backend.allocate(T * H * act);  // (T, H) its compute copy
  gate_ = backend.allocate(T * 2 * I * act);  // (T, 2I) Wi's output
  zero_host_.assign(std::max(T, B * H), 0);
  zero_positions_ = backend.allocate(T * 4);
  zero_rows_ = backend.allocate(B * H * 4);
  backend.copy_to_device(zero_positions_->data(), zero_host_.data(), T * 4);
  backend.copy_to_device(zero_rows_->data(), zero_host_.data(), B * H * 4);
}

PrenormViews PrenormBuffers::views(const TensorView& h, const TensorView& h_low, int64_t T) const {
  PrenormViews v;
  v.h = h;
  v.h_low = h_low;
  v.xn = TensorView(xn_->data(), DType::f32, {T, H_});
  v.xn_low = xn_low_ ? TensorView(xn_low_->data(), dt_, {T, H_}) : TensorView{};
  v.qkv = TensorView(qkv_->data(), dt_, {T, 3 * H_});
  v.ctx = TensorView(ctx_->data(), dt_, {T, H_});
  v.gate = TensorView(gate_->data(), dt_, {T, 2 * I_});
  v.ffa = TensorView(ffn_->data(), dt_, {T, I_});
  return v;
}

TensorView PrenormBuffers::zero_positions(int64_t T) const {
  return TensorView(zero_positions_->data(), DType::i32, {T});
}

TensorView PrenormBuffers::zero_rows(int64_t B) const { return TensorView(zero_rows_->data(), DType::f32, {B, H_}); }

// ---- loading: what the sequence cannot run, its fixed tensors
void prenorm_check_load(const HfConfig& c, const EncoderLoadOptions& options) {
  if (options.int8_linears)
    throw Error(Errc::unsupported, "--precision int8 does not run " + std::string(c.arch->display_name) +
                                       " yet; use --precision f32 or bf16");
}

void prenorm_place_fixed(const HfConfig& c, const PlaceFloats& place, EncoderParams& p) {
  const int64_t H = c.hidden_size;
  p.zeros = place(std::vector<float>(static_cast<size_t>(H), 0.0f), {H});
  p.position_embeddings = TensorView(p.zeros.data, DType::f32, {1, H});
  p.emb_ln_beta = p.zeros;
  for (EncoderLayerParams& layer : p.layers) {
    if (!layer.attn_ln_gamma.empty()) layer.attn_ln_beta = p.zeros;
    layer.ffn_ln_beta = p.zeros;
  }
  const int64_t d = c.head_dim();
  p.rope_global = place(default_rope_inv_freq(d, c.rope_theta), {d / 2});
  p.rope_local = place(default_rope_inv_freq(d, c.local_rope_theta), {d / 2});
}

void prenorm_check_training(const HfConfig& c) {
  if (c.hidden_dropout > 0 || c.attention_dropout > 0)
    throw Error(Errc::unsupported, std::string(c.arch->display_name) +
                                       " trains without dropout in its layers (mlp_dropout, attention_dropout 0,"
                                       " as its hub configs set); config.json sets them above 0");
}

// ---- training: the workspace
PrenormTrainer::PrenormTrainer(const TrainableEncoder& encoder, Backend& backend, int64_t max_tokens,
                               int64_t max_sequences)
    : enc_(encoder), backend_(backend) {
  const HfConfig& c = enc_.config;
  const int64_t T = max_tokens, B = max_sequences, H = c.hidden_size, I = c.intermediate_size;
  const int64_t C = std::max<int64_t>(c.num_labels(), 1), heads = c.num_attention_heads;
  const DType dt = enc_.dtype;
  const bool low = dt != DType::f32;
  auto slab = [&](DType t, int64_t rows, int64_t cols) { return train_slab(backend_, t, rows, cols); };
  for (int64_t l = 0; l <= c.num_hidden_layers; ++l) h_.push_back(slab(DType::f32, T, H));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LayerSlabs x;
    x.qkv = slab(dt, T, 3 * H);
    x.ctx = slab(dt, T, H);
    x.lse = slab(DType::f32, T, heads);
    x.ao = slab(DType::f32, T, H);
    x.xa = slab(DType::f32, T, H);
    x.xm = slab(DType::f32, T, H);
    if (low) {
      x.x_low = slab(dt, T, H);
      x.xa_low = slab(dt, T, H);
      x.xm_low = slab(dt, T, H);
    }
    for (TrainSlab* b : {&x.ma, &x.ra, &x.mm, &x.rm}) *b = slab(DType::f32, T, 1);
    x.gate = slab(dt, T, 2 * I);
    x.ffa = slab(dt, T, I);
    layers_.push_back(std::move(x));
  }
  em_ = slab(DType::f32, T, 1);
  er_ = slab(DType::f32, T, 1);
  h_out_ = slab(DType::f32, T, H);
  mf_ = slab(DType::f32, T, 1);
  rf_ = slab(DType::f32, T, 1);
  for (TrainSlab* b : {&pooled_, &hid_, &head_pre_, &head_ln_, &out_drop_, &g_a_, &g_b_}) *b = slab(DType::f32, B, H);
  head_m_ = slab(DType::f32, B, 1);
  head_r_ = slab(DType::f32, B, 1);
  logits_ = slab(DType::f32, B, C);
  dlogits_ = slab(DType::f32, B, C);
  for (TrainSlab* b : {&d_h_, &d_x_}) *b = slab(DType::f32, T, H);
  d_i_ = slab(DType::f32, T, I);
  d_qkv_ = slab(DType::f32, T, 3 * H);
  d_gate_ = slab(DType::f32, T, 2 * I);
  zero_rows_ = slab(DType::f32, B, H);
  zero_pos_ = slab(DType::i32, T, 1);
  zeros_host_.assign(static_cast<size_t>(std::max(T, B * H)), 0);
  backend_.copy_to_device(zero_rows_.buf->data(), zeros_host_.data(), static_cast<size_t>(B * H) * 4);
  backend_.copy_to_device(zero_pos_.buf->data(), zeros_host_.data(), static_cast<size_t>(T) * 4);
}

int64_t PrenormTrainer::bytes_per_token(const HfConfig& c, DType dt) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, L = c.num_hidden_layers;
  const int64_t a = static_cast<int64_t>(dtype_size(dt)), low = dt == DType::f32 ? 0 : 1;
  // The post-LN family's slabs as they were counted (model/post_ln_family.cc, ungated) ...
  const int64_t per_layer = low * 2 * H * a + 3 * H * a + H * a + c.num_attention_heads * 4 + 3 * H * 4 + 4 * 4 +
                            I * a + I * 4;
  const int64_t projection = c.embedding_size != H ? 2 * c.embedding_size * 4 : 0;
  const int64_t shared = (L + 1) * H * 4 + L * per_layer + 2 * 4 + 3 * H * 4 + I * 4 + 3 * H * 4 + 3 * 4 + projection;
  // ... and this family's own: two normalised copies, their statistics and
  // Wi's output per layer; the final norm's output and statistics; the zero
  // position; d Wi's output.
  return shared + L * (2 * H * 4 + low * 2 * H * a + 4 * 4 + 2 * I * a) + H * 4 + 2 * 4 + 4 + 2 * I * 4;
}

int64_t PrenormTrainer::bytes_per_sequence(const HfConfig& c) {
  return 9 * c.hidden_size * 4 + 2 * std::max<int64_t>(c.num_labels(), 1) * 4 + 5 * 4;
}

void PrenormTrainer::check(const MicroBatchKnobs& k) const {
  if (k.dropout.hidden > 0 || k.dropout.attention > 0)
    throw Error(Errc::unsupported, std::string(enc_.config.arch->display_name) +
                                       " trains without dropout in its layers (as its hub configs set); the"
                                       " classifier's dropout alone may be above 0");
}

// The workspace's views for one micro-batch: the inputs (rotary: one zero
// position row) and what the sequence's training form keeps.
SequenceInputs PrenormTrainer::inputs(const TrainStep& st) const {
  SequenceInputs in;
  in.ids = st.ids;
  in.positions = zero_pos_.vec(st.T);
  in.cu = st.cu;
  in.max_seqlen = st.maxlen;
  in.heads = st.heads;
  in.eps = st.eps;
  return in;
}

PrenormTraining PrenormTrainer::keep(const TrainStep& st) const {
  const int64_t T = st.T;
  PrenormTraining keep;
  keep.drop.attention = st.knobs.dropout.attention;
  keep.drop.seed = st.knobs.seed;
  keep.drop.step = st.layer_step;
  keep.drop.token_offset = st.knobs.token_offset;
  keep.drop.low = st.low;
  keep.em = em_.vec(T);
  keep.er = er_.vec(T);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerSlabs& a = layers_[l];
    PrenormLayerKeep k;
    k.h = h_[l].rows(T);
    if (st.low) {
      k.x_low = a.x_low.rows(T);
      k.xa_low = a.xa_low.rows(T);
      k.xm_low = a.xm_low.rows(T);
    }
    k.qkv = a.qkv.rows(T);
    k.ctx = a.ctx.rows(T);
    k.lse = a.lse.rows(T);
    k.ao = a.ao.rows(T);
    k.xa = a.xa.rows(T);
    k.ma = a.ma.vec(T);
    k.ra = a.ra.vec(T);
    k.xm = a.xm.rows(T);
    k.mm = a.mm.vec(T);
    k.rm = a.rm.vec(T);
    k.gate = a.gate.rows(T);
    k.ffa = a.ffa.rows(T);
    k.next = h_[l + 1].rows(T);
    keep.layers.push_back(k);
  }
  keep.h_out = h_out_.rows(T);
  keep.mf = mf_.vec(T);
  keep.rf = rf_.vec(T);
  return keep;
}

void PrenormTrainer::forward(const TrainStep& st) const {
  const PrenormTraining k = keep(st);
  prenorm_encoder_forward(backend_.ops(), enc_.compute, enc_.config, inputs(st), PrenormViews{}, &k);
}

// ---- head (training): pooled (first token or mean), dense, GELU, LayerNorm, [dropout], classifier; the loss.
void PrenormTrainer::loss(const TrainStep& st, const TensorView& metrics) const {
  const Ops& ops = backend_.ops();
  const HfConfig& c = enc_.config;
  const EncoderParams& p = enc_.compute;
  const int64_t B = st.B;
  const MicroBatchKnobs& k = st.knobs;
  const float pc = k.dropout.classifier;
  const TensorView pooled = pooled_.rows(B), hid = hid_.rows(B), ln = head_ln_.rows(B);
  const TensorView out_in = pc > 0 ? out_drop_.rows(B) : ln;
  ops.pool(pooled, h_out_.rows(st.tokens), st.cu_real,
           c.classifier_mean_pooling ? Pooling::mean : Pooling::cls);  // the real rows only
  ops.linear(hid, pooled, p.head_dense_w, TensorView{}, Activation::none, Accumulate::no);
  ops.bias_gelu_train(hid, head_pre_.rows(B), TensorView{});
  ops.residual_layernorm_train(ln, head_m_.vec(B), head_r_.vec(B), hid, zero_rows_.rows(B), p.head_norm, p.zeros,
                               st.eps);
  if (pc > 0) ops.dropout(out_in, ln, pc, k.seed, k.step, kHeadSite, k.sequence_offset);
  ops.linear(logits_.rows(B), out_in, p.head_out_w, p.head_out_b, Activation::none, Accumulate::no);
  if (k.regression)
    ops.mse_loss(dlogits_.rows(B), metrics, logits_.rows(B), st.targets, k.loss_scale);
  else
    ops.cross_entropy(dlogits_.rows(B), metrics, logits_.rows(B), st.labels, k.label_smoothing, k.loss_scale);
  if (!k.loss_scaler.empty()) ops.loss_scale_multiply(dlogits_.rows(B), k.loss_scaler);
}

// The head's backward, down to d h_out (in d_x).
void PrenormTrainer::backward_head(const TrainStep& st) const {
  const Ops& ops = backend_.ops();
  const HfConfig& c = enc_.config;
  const EncoderParams& p = enc_.compute;
  const EncoderParams& g = enc_.grad;
  const int64_t T = st.T, B = st.B;
  const MicroBatchKnobs& k = st.knobs;
  const float pc = k.dropout.classifier;
  const TensorView pooled = pooled_.rows(B), hid = hid_.rows(B), ln = head_ln_.rows(B);
  const TensorView out_in = pc > 0 ? out_drop_.rows(B) : ln;
  const TensorView g_a = g_a_.rows(B), g_b = g_b_.rows(B);
  ops.linear_backward(g_a, g.head_out_w, g.head_out_b, dlogits_.rows(B), out_in, p.head_out_w,
                      Accumulate::no);                                                                // d out_in
  if (pc > 0) ops.dropout_backward(g_a, g_a, pc, k.seed, k.step, kHeadSite, k.sequence_offset);      // d ln
  ops.layernorm_backward(g_b, g.head_norm, TensorView{}, g_a, hid, zero_rows_.rows(B), head_m_.vec(B),
                         head_r_.vec(B), p.head_norm, Accumulate::no);                               // d GELU out
  ops.bias_gelu_backward(g_b, TensorView{}, g_b, head_pre_.rows(B));
  ops.linear_backward(g_a, g.head_dense_w, TensorView{}, g_b, pooled, p.head_dense_w, Accumulate::no);  // d pooled
  // d h_out: the pooled rows' gradient, every other row (padding too) 0.
  // cu_head reaches the last row (padding included) for the first-token
  // pooling; a mean over the real rows writes the padding's zeros first.
  const TensorView dx = d_x_.rows(T);
  if (!c.classifier_mean_pooling) {
    ops.pool_backward(dx, g_a, h_out_.rows(T), st.cu_head, Pooling::cls);
  } else {
    if (st.tokens < T) ops.pool_backward(dx, zero_rows_.rows(B), TensorView{}, st.cu_head, Pooling::cls);
    ops.pool_backward(d_x_.rows(st.tokens), g_a, h_out_.rows(st.tokens), st.cu_real, Pooling::mean);
  }
}

void PrenormTrainer::backward(const TrainStep& st, const std::function<void(int64_t)>& after_layer) const {
  const int64_t T = st.T;
  PrenormGrads d;
  d.dh = d_h_.rows(T);
  d.dx = d_x_.rows(T);
  d.di = d_i_.rows(T);
  d.dqkv = d_qkv_.rows(T);
  d.dgate = d_gate_.rows(T);
  prenorm_encoder_backward(backend_.ops(), enc_.compute, enc_.grad, enc_.config, inputs(st), keep(st), d, after_layer);
}

}  // namespace stoke
