#include "model/post_ln_family.h"

#include <algorithm>
#include <cmath>

namespace stoke {

// ---- the sequence's pieces (both forms), as transformers computes them

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
  if (c.arch->gated_ffn) {  // GTE, NomicBERT
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

// ---- inference: the whole sequence, and the head
void post_ln_encoder_forward(const Ops& ops, const EncoderParams& p, const HfConfig& c, SequenceInputs in,
                             const TensorView& e, const LayerViews& v) {
  set_architecture_inputs(in, c, p);  // rotary, GLU
  // The embeddings' compute copy is where every layer leaves its own: out_low.
  embeddings_forward(ops, p, in, e, v.x, v.out_low, TensorView{}, TensorView{}, nullptr);
  for (size_t l = 0; l < p.layers.size(); ++l) layer_forward(ops, p.layers[l], in, v, static_cast<int64_t>(l), nullptr);
}

void post_ln_head_forward(const Ops& ops, const EncoderParams& p, const HfConfig& c, const TensorView& h,
                          const TensorView& rows, const TensorView& first, const TensorView& hidden) {
  ops.gather_rows(first, h, rows);
  ops.linear(hidden, first, p.head_dense_w, p.head_dense_b, head_activation(*c.arch), Accumulate::no);
}

// ---- inference: the workspace
PostLnBuffers::PostLnBuffers(Backend& backend, const HfConfig& c, DType dt, size_t T)
    : dt_(dt), H_(c.hidden_size), I_(c.intermediate_size) {
  const size_t H = static_cast<size_t>(H_), I = static_cast<size_t>(I_), act = dtype_size(dt);
  qkv_ = backend.allocate(T * 3 * H * act);  // (T, 3H)
  ctx_ = backend.allocate(T * H * act);      // (T, H) attention output
  tmp_ = backend.allocate(T * H * 4);        // (T, H) f32 dense outputs before residual + LayerNorm
  ffn_ = backend.allocate(T * I * act);      // (T, I)
  if (c.arch->gated_ffn) ffgu_ = backend.allocate(T * 2 * I * act);  // (T, 2I) both GLU halves
}

LayerViews PostLnBuffers::views(const TensorView& h, const TensorView& h_low, int64_t T) const {
  // The GEMMs read the compute dtype; the residual stream and LayerNorm stay
  // f32. Each LayerNorm also writes the compute-dtype copy the next GEMM
  // reads (h_low), in the same pass. The residual stream h is updated in
  // place; tmp holds each block's f32 projection before its LayerNorm.
  const TensorView tmp(tmp_->data(), DType::f32, {T, H_});
  LayerViews v;
  v.x = v.hm = v.out = h;
  v.x_in = h_low.empty() ? h : h_low;
  v.hm_low = v.out_low = h_low;
  v.qkv = TensorView(qkv_->data(), dt_, {T, 3 * H_});
  v.ctx = TensorView(ctx_->data(), dt_, {T, H_});
  v.ao = v.fo = tmp;
  v.ffa = TensorView(ffn_->data(), dt_, {T, I_});
  if (ffgu_) v.ffgu = TensorView(ffgu_->data(), dt_, {T, 2 * I_});
  return v;
}

// ---- training: the workspace
PostLnTrainer::PostLnTrainer(const TrainableEncoder& encoder, Backend& backend, int64_t max_tokens,
                             int64_t max_sequences)
    : enc_(encoder), backend_(backend) {
  const HfConfig& c = enc_.config;
  const int64_t T = max_tokens, B = max_sequences, H = c.hidden_size, I = c.intermediate_size;
  const int64_t C = std::max<int64_t>(c.num_labels(), 1), heads = c.num_attention_heads;
  const DType dt = enc_.dtype;
  const bool low = dt != DType::f32;
  const bool gated = c.arch->gated_ffn;
  auto slab = [&](DType t, int64_t rows, int64_t cols) { return train_slab(backend_, t, rows, cols); };
  for (int64_t l = 0; l <= c.num_hidden_layers; ++l) h_.push_back(slab(DType::f32, T, H));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LayerSlabs x;
    if (low) x.x_low = slab(dt, T, H);
    x.qkv = slab(dt, T, 3 * H);
    x.ctx = slab(dt, T, H);
    x.lse = slab(DType::f32, T, heads);
    x.ao = slab(DType::f32, T, H);
    x.m1 = slab(DType::f32, T, 1);
    x.r1 = slab(DType::f32, T, 1);
    x.hm = slab(DType::f32, T, H);
    if (low) x.hm_low = slab(dt, T, H);
    if (gated) x.ffgu = slab(dt, T, 2 * I);  // glu's input (its backward reads it)
    x.ffa = slab(dt, T, I);
    if (!gated) x.ffpre = slab(DType::f32, T, I);  // GELU's pre-activation
    x.fo = slab(DType::f32, T, H);
    x.m2 = slab(DType::f32, T, 1);
    x.r2 = slab(DType::f32, T, 1);
    layers_.push_back(std::move(x));
  }
  em_ = slab(DType::f32, T, 1);
  er_ = slab(DType::f32, T, 1);
  if (!enc_.master.rel_bias.empty()) {  // MPNet (see EncoderRunner: a batch uses the middle 2M - 1 rows)
    rel_buckets_host_ = relative_position_buckets(static_cast<int>(c.max_position_embeddings),
                                                  c.relative_attention_num_buckets);
    const int64_t R = static_cast<int64_t>(rel_buckets_host_.size());
    for (TrainSlab* b : {&rel_, &d_rel_, &d_rel_l_}) *b = slab(DType::f32, R, heads);
    rel_buckets_ = backend_.allocate(static_cast<size_t>(R) * 4);
    backend_.copy_to_device(rel_buckets_->data(), rel_buckets_host_.data(), static_cast<size_t>(R) * 4);
  }
  if (!enc_.master.emb_proj_w.empty()) {
    emb_ = slab(DType::f32, T, c.embedding_size);
    d_emb_ = slab(DType::f32, T, c.embedding_size);
  }
  for (TrainSlab* b : {&first_, &pooled_, &pooled_drop_, &first_drop_, &g_a_, &g_b_, &head_pre_})
    *b = slab(DType::f32, B, H);
  logits_ = slab(DType::f32, B, C);
  dlogits_ = slab(DType::f32, B, C);
  for (TrainSlab* b : {&d_h_, &d_x_, &d_t_}) *b = slab(DType::f32, T, H);
  d_i_ = slab(DType::f32, T, I);
  d_qkv_ = slab(DType::f32, T, 3 * H);
  if (gated) d_gu_ = slab(DType::f32, T, 2 * I);
}

int64_t PostLnTrainer::bytes_per_token(const HfConfig& c, DType dt) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, L = c.num_hidden_layers;
  const int64_t a = static_cast<int64_t>(dtype_size(dt)), low = dt == DType::f32 ? 0 : 1;
  // Gated encoders keep glu's (2I) input instead of GELU's (I) f32 pre-activation, and one (2I) f32 gradient.
  const bool gated = c.arch->gated_ffn;
  const int64_t ffn_saved = gated ? I * a + 2 * I * a : I * a + I * 4;
  const int64_t per_layer = low * 2 * H * a + 3 * H * a + H * a + c.num_attention_heads * 4 + 3 * H * 4 + 4 * 4 +
                            ffn_saved;
  const int64_t projection = c.embedding_size != H ? 2 * c.embedding_size * 4 : 0;
  return (L + 1) * H * 4 + L * per_layer + 2 * 4 + 3 * H * 4 + I * 4 + 3 * H * 4 + 3 * 4 + projection +
         (gated ? 2 * I * 4 : 0);
}

int64_t PostLnTrainer::bytes_per_sequence(const HfConfig& c) {
  return 7 * c.hidden_size * 4 + 2 * std::max<int64_t>(c.num_labels(), 1) * 4 + 5 * 4;
}

TensorView PostLnTrainer::rel_buckets_view(const TrainStep& st) const {
  const int64_t P = enc_.config.max_position_embeddings;
  return TensorView(static_cast<int32_t*>(rel_buckets_->data()) + (P - st.maxlen), DType::i32,
                    {2 * static_cast<int64_t>(st.maxlen) - 1});
}

// ---- training forward, keeping what the backward reads
void PostLnTrainer::forward(const TrainStep& st) const {
  const Ops& ops = backend_.ops();
  const EncoderParams& p = enc_.compute;
  const int64_t T = st.T;
  const MicroBatchKnobs& k = st.knobs;
  const float ph = k.dropout.hidden;
  const bool project = !p.emb_proj_w.empty();
  SequenceInputs in;
  in.ids = st.ids;
  in.positions = st.positions;
  in.types = st.types;
  in.cu = st.cu;
  in.max_seqlen = st.maxlen;
  in.heads = st.heads;
  in.eps = st.eps;
  set_architecture_inputs(in, enc_.config, p);  // rotary, GLU
  if (!p.rel_bias.empty()) {
    in.rel = rel_.rows(2 * static_cast<int64_t>(st.maxlen) - 1);
    relative_bias_forward(ops, in.rel, p.rel_bias, rel_buckets_view(st));
  }
  SequenceTraining train;
  train.hidden = ph;
  train.attention = k.dropout.attention;
  train.seed = k.seed;
  train.step = st.layer_step;
  train.token_offset = k.token_offset;
  train.low = st.low;
  // Embeddings; ELECTRA's are of size E, dropped out, then projected to H.
  embeddings_forward(ops, p, in, project ? emb_.rows(T) : h_[0].rows(T), h_[0].rows(T), TensorView{}, em_.vec(T),
                     er_.vec(T), &train);
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const LayerSlabs& a = layers_[l];
    LayerViews v;
    v.x = h_[l].rows(T);
    v.x_in = st.low ? a.x_low.rows(T) : v.x;  // GEMM input in the compute dtype
    v.qkv = a.qkv.rows(T);
    v.ctx = a.ctx.rows(T);
    v.lse = a.lse.rows(T);
    v.ao = a.ao.rows(T);
    v.hm = a.hm.rows(T);
    if (st.low) v.hm_low = a.hm_low.rows(T);
    v.m1 = a.m1.vec(T);
    v.r1 = a.r1.vec(T);
    if (a.ffgu.buf) v.ffgu = a.ffgu.rows(T);
    v.ffa = a.ffa.rows(T);
    if (a.ffpre.buf) v.ffpre = a.ffpre.rows(T);
    v.fo = a.fo.rows(T);
    v.out = h_[l + 1].rows(T);
    v.m2 = a.m2.vec(T);
    v.r2 = a.r2.vec(T);
    layer_forward(ops, p.layers[l], in, v, static_cast<int64_t>(l), &train);
  }
}

// ---- head and loss: first token, [dropout], dense + activation, dropout,
// output layer (BERT: the pooler is the dense; RoBERTa / ELECTRA: the head's own).
void PostLnTrainer::loss(const TrainStep& st, const TensorView& metrics) const {
  const Ops& ops = backend_.ops();
  const EncoderParams& p = enc_.compute;
  const int64_t T = st.T, B = st.B;
  const MicroBatchKnobs& k = st.knobs;
  const float pc = k.dropout.classifier;
  const TensorView first = first_.rows(B), hid = pooled_.rows(B), hid_drop = pooled_drop_.rows(B);
  const TensorView head_in = st.drop_before_dense ? first_drop_.rows(B) : first;
  const TensorView logits = logits_.rows(B), dlogits = dlogits_.rows(B);
  ops.gather_rows(first, h_[p.layers.size()].rows(T), st.rows);
  if (st.drop_before_dense) ops.dropout(head_in, first, pc, k.seed, k.step, kHeadSite, k.sequence_offset);
  if (st.act == Activation::gelu_erf) {  // GELU's backward reads the pre-activation
    ops.linear(hid, head_in, p.head_dense_w, TensorView{}, Activation::none, Accumulate::no);
    ops.bias_gelu_train(hid, head_pre_.rows(B), p.head_dense_b);
  } else {
    ops.linear(hid, head_in, p.head_dense_w, p.head_dense_b, st.act, Accumulate::no);
  }
  const TensorView out_in = pc > 0 ? hid_drop : hid;
  if (pc > 0) ops.dropout(hid_drop, hid, pc, k.seed, k.step, st.out_site, k.sequence_offset);
  ops.linear(logits, out_in, p.head_out_w, p.head_out_b, Activation::none, Accumulate::no);
  if (k.regression)
    ops.mse_loss(dlogits, metrics, logits, st.targets, k.loss_scale);
  else
    ops.cross_entropy(dlogits, metrics, logits, st.labels, k.label_smoothing, k.loss_scale);
  if (!k.loss_scaler.empty()) ops.loss_scale_multiply(dlogits, k.loss_scaler);  // f16: the scaled loss's gradient
}

// ---- backward: the forward's mirror, line by line
void PostLnTrainer::backward_head(const TrainStep& st) const {
  const Ops& ops = backend_.ops();
  const EncoderParams& p = enc_.compute;
  const EncoderParams& g = enc_.grad;
  const int64_t T = st.T, B = st.B;
  const MicroBatchKnobs& k = st.knobs;
  const float pc = k.dropout.classifier;
  const TensorView first = first_.rows(B), hid = pooled_.rows(B), hid_drop = pooled_drop_.rows(B);
  const TensorView head_in = st.drop_before_dense ? first_drop_.rows(B) : first;
  const TensorView out_in = pc > 0 ? hid_drop : hid;
  const TensorView g_a = g_a_.rows(B), g_b = g_b_.rows(B);
  ops.linear_backward(g_a, g.head_out_w, g.head_out_b, dlogits_.rows(B), out_in, p.head_out_w,
                      Accumulate::no);  // g_a = d out_in
  if (pc > 0) ops.dropout_backward(g_a, g_a, pc, k.seed, k.step, st.out_site, k.sequence_offset);  // d hid
  if (st.act == Activation::gelu_erf) {
    ops.bias_gelu_backward(g_a, g.head_dense_b, g_a, head_pre_.rows(B));
    ops.linear_backward(g_b, g.head_dense_w, TensorView{}, g_a, head_in, p.head_dense_w, Accumulate::no);  // d head_in
  } else {  // tanh and ReLU: their derivative from the output
    if (st.act == Activation::relu)
      ops.relu_backward(g_a, g_a, hid);
    else
      ops.tanh_backward(g_a, g_a, hid);
    ops.linear_backward(g_b, g.head_dense_w, g.head_dense_b, g_a, head_in, p.head_dense_w,
                        Accumulate::no);  // g_b = d head_in
  }
  if (st.drop_before_dense) ops.dropout_backward(g_b, g_b, pc, k.seed, k.step, kHeadSite, k.sequence_offset);
  // d h[L]: the first token of each sequence gets g_b, every other token
  // (padding too) 0.
  ops.pool_backward(d_h_.rows(T), g_b, TensorView{}, st.cu_head, Pooling::cls);
}

void PostLnTrainer::backward(const TrainStep& st, const std::function<void(int64_t)>& after_layer) const {
  const Ops& ops = backend_.ops();
  const EncoderParams& p = enc_.compute;
  const EncoderParams& g = enc_.grad;
  const int64_t T = st.T;
  const MicroBatchKnobs& k = st.knobs;
  const float ph = k.dropout.hidden;
  // The residual adds are folded into the GEMMs (Accumulate::yes): each
  // LayerNorm's backward writes the residual path's gradient straight into
  // the buffer the branch's input GEMM then adds into (dx for d hm, dh for
  // d x), so no separate add pass reads and writes [T, H] twice a layer.
  TensorView dh = d_h_.rows(T), dx = d_x_.rows(T);
  const TensorView dt = d_t_.rows(T), di = d_i_.rows(T), dqkv = d_qkv_.rows(T);
  SequenceInputs arch;  // rotary and GLU settings, as the forward took them
  set_architecture_inputs(arch, enc_.config, p);
  const TensorView dgu = arch.gated ? d_gu_.rows(T) : TensorView{};
  for (size_t li = p.layers.size(); li-- > 0;) {
    const int64_t l = static_cast<int64_t>(li);
    const EncoderLayerParams& w = p.layers[li];
    const EncoderLayerParams& gw = g.layers[li];
    const LayerSlabs& a = layers_[li];
    const TensorView x_in = st.low ? a.x_low.rows(T) : h_[li].rows(T);
    const TensorView hm_in = st.low ? a.hm_low.rows(T) : a.hm.rows(T);
    // FFN block: h[l+1] = LN(dropout(fo) + hm)
    ops.layernorm_backward(dx, gw.ffn_ln_gamma, gw.ffn_ln_beta, dh, a.fo.rows(T), a.hm.rows(T), a.m2.vec(T),
                           a.r2.vec(T), w.ffn_ln_gamma, Accumulate::no);       // dx = d fo' = d hm (residual)
    const TensorView dfo = ph > 0 ? dt : dx;
    if (ph > 0)
      ops.dropout_backward(dt, dx, ph, k.seed, st.layer_step, SequenceTraining::site(l, 2), k.token_offset);
    ops.linear_backward(di, gw.ffn_out_w, gw.ffn_out_b, dfo, a.ffa.rows(T), w.ffn_out_w, Accumulate::no);
    if (arch.gated) {  // [dropout], glu, the GEMM of both halves
      if (ph > 0 && arch.glu_dropout)
        ops.dropout_backward(di, di, ph, k.seed, st.layer_step, SequenceTraining::glu_site(l), k.token_offset);
      ops.glu_backward(dgu, di, a.ffgu.rows(T), arch.glu);
      ops.linear_backward(dx, gw.ffn_in_w, gw.ffn_in_b, dgu, hm_in, w.ffn_in_w, Accumulate::yes);  // d hm, both paths
    } else {
      ops.bias_gelu_backward(di, gw.ffn_in_b, di, a.ffpre.rows(T));
      ops.linear_backward(dx, gw.ffn_in_w, TensorView{}, di, hm_in, w.ffn_in_w, Accumulate::yes);  // d hm, both paths
    }
    // Attention block: hm = LN(dropout(ao) + x)
    ops.layernorm_backward(dh, gw.attn_ln_gamma, gw.attn_ln_beta, dx, a.ao.rows(T), h_[li].rows(T), a.m1.vec(T),
                           a.r1.vec(T), w.attn_ln_gamma, Accumulate::no);      // dh = d ao' = d x (residual)
    const TensorView dao = ph > 0 ? dt : dh;
    if (ph > 0)
      ops.dropout_backward(dt, dh, ph, k.seed, st.layer_step, SequenceTraining::site(l, 1), k.token_offset);
    ops.linear_backward(dx, gw.attn_out_w, gw.attn_out_b, dao, a.ctx.rows(T), w.attn_out_w,
                        Accumulate::no);                                       // dx = d ctx
    if (p.rel_bias.empty()) {
      ops.attention_backward(dqkv, dx, a.qkv.rows(T), a.ctx.rows(T), a.lse.rows(T), st.cu, st.heads, st.maxlen, 0,
                             st.attn_drop(l));
    } else {  // MPNet: the shared bias's gradient, summed over the layers
      const int64_t R = 2 * static_cast<int64_t>(st.maxlen) - 1;
      const bool last = li + 1 == p.layers.size();
      ops.attention_relpos_backward(dqkv, last ? d_rel_.rows(R) : d_rel_l_.rows(R), dx, a.qkv.rows(T),
                                    a.ctx.rows(T), a.lse.rows(T), st.cu, st.heads, st.maxlen, rel_.rows(R),
                                    st.attn_drop(l));
      if (!last) ops.add(d_rel_.rows(R), d_rel_l_.rows(R));
    }
    if (!arch.inv_freq.empty()) ops.rotary_backward(dqkv, st.cu, arch.inv_freq, arch.rope);  // d q, d k before rotary
    ops.linear_backward(dh, gw.qkv_w, gw.qkv_b, dqkv, x_in, w.qkv_w, Accumulate::yes);  // dh = d x, both paths
    if (after_layer) after_layer(l);
  }
  // The relative bias: its rows' gradient into the bucket table.
  if (!p.rel_bias.empty())
    ops.gather_rows_backward(g.rel_bias, d_rel_.rows(2 * static_cast<int64_t>(st.maxlen) - 1), rel_buckets_view(st));
  // Embeddings: [projection], dropout, LayerNorm, the tables.
  TensorView de = dh;
  if (!p.emb_proj_w.empty()) {
    de = d_emb_.rows(T);
    ops.linear_backward(de, g.emb_proj_w, g.emb_proj_b, dh, emb_.rows(T), p.emb_proj_w, Accumulate::no);  // de = d e
  }
  if (ph > 0) ops.dropout_backward(de, de, ph, k.seed, st.layer_step, 0, k.token_offset);
  ops.embed_layernorm_backward(g.word_embeddings, g.position_embeddings, g.token_type_embeddings, g.emb_ln_gamma,
                               g.emb_ln_beta, de, st.ids, st.positions, st.types, p.word_embeddings,
                               p.position_embeddings, p.token_type_embeddings, em_.vec(T), er_.vec(T),
                               p.emb_ln_gamma);
}

}  // namespace stoke
