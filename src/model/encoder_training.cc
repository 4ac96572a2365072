#include "model/encoder_training.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "model/layer_sequence.h"
#include "model/prenorm_family.h"

namespace stoke {

namespace {

TensorView shaped(void* data, DType t, std::initializer_list<int64_t> shape) { return TensorView(data, t, shape); }

}  // namespace

// Device memory of the workspace: every activation the backward reads, per
// layer, sized for the maximum micro-batch. Views are cut per batch.
struct EncoderTrainingRunner::Saved {
  struct Slab {
    std::unique_ptr<Buffer> buf;
    DType dtype = DType::f32;
    int64_t cols = 0;
    TensorView rows(int64_t n) const { return TensorView(buf->data(), dtype, {n, cols}); }
    TensorView vec(int64_t n) const { return TensorView(buf->data(), dtype, {n}); }
  };
  struct LayerSlabs {
    Slab x_low, qkv, ctx, lse, ao, m1, r1, hm, hm_low, ffgu, ffa, ffpre, fo, m2, r2;
  };
  std::vector<Slab> h;             // L + 1 residual streams (f32): h[l] = input of layer l
  std::vector<LayerSlabs> layers;
  Slab em, er;                     // embedding LayerNorm statistics
  Slab emb, d_emb;                 // (T, E) f32: LayerNorm output before the projection, its gradient (E != H only)
  Slab first, pooled, pooled_drop, first_drop, logits, dlogits;  // head (B rows)
  Slab head_pre;                   // (B, H) the head's pre-activation (GELU heads)
  Slab rel, d_rel, d_rel_l;        // (2P - 1, heads) f32 MPNet's relative bias, its gradient, one layer's
  std::unique_ptr<Buffer> rel_buckets;  // (2P - 1) i32 the bucket of every distance, copied once
  std::vector<int32_t> rel_buckets_host;
  Slab g_a, g_b;                   // head gradient rows (B, H)
  Slab d_h, d_x, d_t;              // (T, H) f32 gradients
  Slab d_i;                        // (T, I) f32
  Slab d_qkv;                      // (T, 3H) f32
  Slab d_gu;                       // (T, 2I) f32 gated encoders: the GLU input's gradient
  // ModernBERT (LayerFamily::prenorm_encoder, model/prenorm_family.h). Per layer, beside LayerSlabs (its qkv,
  // ctx, lse, ffa; ao holds h + attention after the block): the LayerNorms'
  // outputs, compute copies and statistics, and Wi's output. h[l + 1] holds
  // the FFN projection, then the layer's output sum.
  struct PrenormSlabs {
    Slab xa, xa_low, ma, ra;  // attn_norm (layers > 0)
    Slab xm, xm_low, mm, rm;  // mlp_norm
    Slab gate;                // (T, 2I) compute dtype
  };
  std::vector<PrenormSlabs> pre;
  Slab h_out, mf, rf;              // (T, H) the final LayerNorm's output, its statistics
  Slab head_ln, head_m, head_r;    // (B, H) the head's LayerNorm output, (B) statistics
  Slab zero_rows, zero_pos;        // (B, H) f32 zeros (the head LayerNorm's "residual"), (T) i32 zero positions
  Slab d_gate;                     // (T, 2I) f32
  std::vector<int32_t> zeros_host; // the zeros' host copy (read by the copies, on the stream)
};

EncoderTrainingRunner::EncoderTrainingRunner(const TrainableEncoder& encoder, Backend& backend, int64_t max_tokens,
                                             int64_t max_sequences, size_t staging_slots)
    : enc_(encoder),
      backend_(backend),
      max_tokens_(max_tokens),
      max_sequences_(max_sequences),
      staging_(staging_slots < 1 ? 1 : staging_slots),
      plan_(std::max<int64_t>(max_tokens, 1), std::max<int64_t>(max_sequences, 1),
            std::max<int64_t>(encoder.config.usable_positions(), 1)),
      saved_(std::make_unique<Saved>()) {
  if (max_tokens <= 0 || max_sequences <= 0) throw Error(Errc::invalid_argument, "training workspace must be positive");
  const HfConfig& c = enc_.config;
  const int64_t T = max_tokens, B = max_sequences, H = c.hidden_size, I = c.intermediate_size;
  const int64_t C = std::max<int64_t>(c.num_labels(), 1), heads = c.num_attention_heads;
  const DType dt = enc_.dtype;
  const bool low = dt != DType::f32;
  const bool gated = c.arch->gated_ffn;
  auto slab = [&](DType t, int64_t rows, int64_t cols) {
    Saved::Slab s;
    s.dtype = t;
    s.cols = cols;
    s.buf = backend_.allocate(static_cast<size_t>(std::max<int64_t>(rows * cols, 1)) * dtype_size(t));
    return s;
  };
  Saved& s = *saved_;
  for (int64_t l = 0; l <= c.num_hidden_layers; ++l) s.h.push_back(slab(DType::f32, T, H));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    Saved::LayerSlabs x;
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
    s.layers.push_back(std::move(x));
  }
  s.em = slab(DType::f32, T, 1);
  s.er = slab(DType::f32, T, 1);
  if (!enc_.master.rel_bias.empty()) {  // MPNet (see EncoderRunner: a batch uses the middle 2M - 1 rows)
    s.rel_buckets_host = relative_position_buckets(static_cast<int>(c.max_position_embeddings),
                                                   c.relative_attention_num_buckets);
    const int64_t R = static_cast<int64_t>(s.rel_buckets_host.size());
    for (Saved::Slab* b : {&s.rel, &s.d_rel, &s.d_rel_l}) *b = slab(DType::f32, R, heads);
    s.rel_buckets = backend_.allocate(static_cast<size_t>(R) * 4);
    backend_.copy_to_device(s.rel_buckets->data(), s.rel_buckets_host.data(), static_cast<size_t>(R) * 4);
  }
  if (!enc_.master.emb_proj_w.empty()) {
    s.emb = slab(DType::f32, T, c.embedding_size);
    s.d_emb = slab(DType::f32, T, c.embedding_size);
  }
  for (Saved::Slab* b : {&s.first, &s.pooled, &s.pooled_drop, &s.first_drop, &s.g_a, &s.g_b, &s.head_pre})
    *b = slab(DType::f32, B, H);
  s.logits = slab(DType::f32, B, C);
  s.dlogits = slab(DType::f32, B, C);
  for (Saved::Slab* b : {&s.d_h, &s.d_x, &s.d_t}) *b = slab(DType::f32, T, H);
  s.d_i = slab(DType::f32, T, I);
  s.d_qkv = slab(DType::f32, T, 3 * H);
  if (gated) s.d_gu = slab(DType::f32, T, 2 * I);

  if (c.arch->family == LayerFamily::prenorm_encoder) {
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      Saved::PrenormSlabs x;
      x.xa = slab(DType::f32, T, H);
      x.xm = slab(DType::f32, T, H);
      if (low) {
        x.xa_low = slab(dt, T, H);
        x.xm_low = slab(dt, T, H);
      }
      for (Saved::Slab* b : {&x.ma, &x.ra, &x.mm, &x.rm}) *b = slab(DType::f32, T, 1);
      x.gate = slab(dt, T, 2 * I);
      s.pre.push_back(std::move(x));
    }
    s.h_out = slab(DType::f32, T, H);
    s.mf = slab(DType::f32, T, 1);
    s.rf = slab(DType::f32, T, 1);
    s.head_ln = slab(DType::f32, B, H);
    s.head_m = slab(DType::f32, B, 1);
    s.head_r = slab(DType::f32, B, 1);
    s.zero_rows = slab(DType::f32, B, H);
    s.zero_pos = slab(DType::i32, T, 1);
    s.d_gate = slab(DType::f32, T, 2 * I);
    s.zeros_host.assign(static_cast<size_t>(std::max(T, B * H)), 0);
    backend_.copy_to_device(s.zero_rows.buf->data(), s.zeros_host.data(), static_cast<size_t>(B * H) * 4);
    backend_.copy_to_device(s.zero_pos.buf->data(), s.zeros_host.data(), static_cast<size_t>(T) * 4);
  }
  for (auto* p : {&ids_, &types_, &positions_}) {
    owned_.push_back(backend_.allocate(static_cast<size_t>(T) * 4));
    *p = owned_.back()->data();
  }
  // Graph-shaped micro-batches have more sequence slots (the padding's).
  max_slots_ = std::max(B, plan_.max_sequence_slots());
  owned_.push_back(backend_.allocate(static_cast<size_t>(max_slots_ + 1) * 4));
  cu_ = owned_.back()->data();
  owned_.push_back(backend_.allocate(static_cast<size_t>(B) * 4));
  rows_ = owned_.back()->data();
  owned_.push_back(backend_.allocate(static_cast<size_t>(B) * 4));
  labels_ = owned_.back()->data();
  owned_.push_back(backend_.allocate(static_cast<size_t>(B + 1) * 4));
  cu_head_ = owned_.back()->data();
  owned_.push_back(backend_.allocate(4));
  step_ = owned_.back()->data();
  // ids, types, positions; cu; rows, labels; cu_head; the step.
  const int64_t staged = 3 * T + (max_slots_ + 1) + 2 * B + (B + 1) + 1;
  for (auto& st : staging_) st.host = backend_.allocate_host(static_cast<size_t>(staged) * 4);
  graphs_on_ = backend_.can_capture();
  stats_.on = graphs_on_;
}

void EncoderTrainingRunner::set_graphs(bool on) {
  graphs_on_ = on && backend_.can_capture() && !stats_.capture_failed;
  stats_.on = graphs_on_;
}

EncoderTrainingRunner::~EncoderTrainingRunner() { backend_.drain(); }

int64_t EncoderTrainingRunner::bytes_per_token(const HfConfig& c, DType dt) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, L = c.num_hidden_layers;
  const int64_t a = static_cast<int64_t>(dtype_size(dt)), low = dt == DType::f32 ? 0 : 1;
  // Gated encoders keep glu's (2I) input instead of GELU's (I) f32 pre-activation, and one (2I) f32 gradient.
  const bool gated = c.arch->gated_ffn;
  const int64_t ffn_saved = gated ? I * a + 2 * I * a : I * a + I * 4;
  const int64_t per_layer = low * 2 * H * a + 3 * H * a + H * a + c.num_attention_heads * 4 + 3 * H * 4 + 4 * 4 +
                            ffn_saved;
  const int64_t projection = c.embedding_size != H ? 2 * c.embedding_size * 4 : 0;
  // The pre-norm family keeps more (model/prenorm_family.h).
  const int64_t prenorm = c.arch->family == LayerFamily::prenorm_encoder ? prenorm_training_bytes_per_token(c, dt) : 0;
  return (L + 1) * H * 4 + L * per_layer + 2 * 4 + 3 * H * 4 + I * 4 + 3 * H * 4 + 3 * 4 + projection +
         (gated ? 2 * I * 4 : 0) + prenorm;
}

int64_t EncoderTrainingRunner::bytes_per_sequence(const HfConfig& c) {
  return (c.arch->family == LayerFamily::prenorm_encoder ? 9 : 7) * c.hidden_size * 4 + 2 * std::max<int64_t>(c.num_labels(), 1) * 4 + 5 * 4;
}

void EncoderTrainingRunner::enqueue(const PackedBatch& batch, std::span<const int32_t> labels,
                                    std::span<const float> targets, const MicroBatchKnobs& k,
                                    const TensorView& metrics) {
  const HfConfig& c = enc_.config;
  const int64_t T = batch.tokens(), B = batch.sequences();
  const int64_t C = c.num_labels();
  const bool regression = k.regression;
  if (regression && C != 1) throw Error(Errc::invalid_argument, "regression needs a one-output head");
  if (B == 0) return;
  if (static_cast<int64_t>(regression ? targets.size() : labels.size()) != B)
    throw Error(Errc::invalid_argument, "micro-batch needs one label per sequence");
  check_micro_batch(batch, k);
  if (!regression)
    for (int32_t y : labels)
      if (y < 0 || y >= C)
        throw Error(Errc::invalid_argument, "label " + std::to_string(y) + " is outside [0, " + std::to_string(C) + ")");
  head_activation(*c.arch);  // refuse a head no op computes, before enqueueing anything

  const std::optional<TrainBucket> bucket = graph_bucket(batch, k);
  stage(batch, labels, targets, regression, bucket, k.step);
  const Step st = step_views(batch, k, bucket);
  // The three phases of either layer sequence: the encoder forward, the head
  // (its loss and its backward down to the encoder's output gradient), the
  // encoder backward.
  const bool prenorm = c.arch->family == LayerFamily::prenorm_encoder;
  const auto encoder_forward = [&] { prenorm ? forward_prenorm(st) : forward(st); };
  const auto head = [&] {
    if (prenorm) {
      loss_prenorm(st, metrics);
      backward_prenorm_head(st);
    } else {
      loss(st, metrics);
      backward_head(st);
    }
  };
  const auto encoder_backward = [&] { prenorm ? backward_prenorm_layers(st) : backward_layers(st); };
  if (!bucket) {
    ++stats_.eager;
    encoder_forward();
    head();
    encoder_backward();
    return;
  }
  stats_.real_tokens += T;
  stats_.padded_tokens += bucket->tokens;
  const GraphKey key{*bucket, k.dropout.hidden, k.dropout.attention, k.seed, k.token_offset};
  run_phase(key, 0, encoder_forward);
  head();  // the real sequences only: eager
  run_phase(key, 1, encoder_backward);
}

void EncoderTrainingRunner::check_micro_batch(const PackedBatch& batch, const MicroBatchKnobs& k) const {
  const HfConfig& c = enc_.config;
  const int64_t T = batch.tokens(), B = batch.sequences();
  if (T > max_tokens_ || B > max_sequences_)
    throw Error(Errc::invalid_argument, "micro-batch of " + std::to_string(B) + " sequences / " + std::to_string(T) +
                                            " tokens exceeds the training workspace (" +
                                            std::to_string(max_sequences_) + " / " + std::to_string(max_tokens_) + ")");
  check_packed_batch(batch, c);
  if (c.arch->family == LayerFamily::prenorm_encoder && (k.dropout.hidden > 0 || k.dropout.attention > 0))
    throw Error(Errc::unsupported, std::string(c.arch->display_name) +
                                       " trains without dropout in its layers (as its hub configs set); the"
                                       " classifier's dropout alone may be above 0");
}

void EncoderTrainingRunner::enqueue_embedding_forward(const PackedBatch& batch, const MicroBatchKnobs& k,
                                                      PoolingMode pooling, const TensorView& out) {
  const int64_t B = batch.sequences();
  if (B == 0) return;
  check_micro_batch(batch, k);
  if (out.rank != 2 || out.dim(0) != B || out.dim(1) != enc_.config.hidden_size || out.dtype != DType::f32)
    throw Error(Errc::invalid_argument, "embedding forward: out must be f32 [B, hidden]");
  const std::vector<int32_t> no_labels(static_cast<size_t>(B), 0);
  stage(batch, no_labels, {}, false, std::nullopt, k.step);
  const Step st = step_views(batch, k, std::nullopt);
  ++stats_.eager;
  const bool prenorm = enc_.config.arch->family == LayerFamily::prenorm_encoder;
  prenorm ? forward_prenorm(st) : forward(st);
  const TensorView last = prenorm ? saved_->h_out.rows(st.T) : saved_->h[enc_.compute.layers.size()].rows(st.T);
  backend_.ops().pool(out, last, st.cu, pooling);
}

void EncoderTrainingRunner::enqueue_embedding_backward(const PackedBatch& batch, const MicroBatchKnobs& k,
                                                       PoolingMode pooling, const TensorView& d_out) {
  const int64_t B = batch.sequences();
  if (B == 0) return;
  check_micro_batch(batch, k);
  if (d_out.rank != 2 || d_out.dim(0) != B || d_out.dim(1) != enc_.config.hidden_size || d_out.dtype != DType::f32)
    throw Error(Errc::invalid_argument, "embedding backward: d_out must be f32 [B, hidden]");
  const Step st = step_views(batch, k, std::nullopt);
  const bool prenorm = enc_.config.arch->family == LayerFamily::prenorm_encoder;
  Saved& s = *saved_;
  // d of the last hidden state: the pooled rows' gradient spread back
  // (pool_backward writes every row), where each layer sequence's backward
  // starts: d h[L] (post-LN), d h_out (pre-norm, in d_x).
  const TensorView last = prenorm ? s.h_out.rows(st.T) : s.h[enc_.compute.layers.size()].rows(st.T);
  backend_.ops().pool_backward(prenorm ? s.d_x.rows(st.T) : s.d_h.rows(st.T), d_out, last, st.cu, pooling);
  prenorm ? backward_prenorm_layers(st) : backward_layers(st);
}

std::optional<TrainBucket> EncoderTrainingRunner::graph_bucket(const PackedBatch& batch,
                                                               const MicroBatchKnobs& k) const {
  (void)k;
  if (!(graphs_on_ || pad_without_capture_) || backward_hook_) return std::nullopt;
  return plan_.bucket_of(batch.tokens(), batch.sequences(), batch.max_seqlen);
}

void EncoderTrainingRunner::run_phase(const GraphKey& key, int phase, const std::function<void()>& enqueue_phase) {
  if (!graphs_on_) {  // tests (pad_without_capture_), or a capture failed earlier in this micro-batch
    enqueue_phase();
    return;
  }
  auto& graphs = graphs_[phase];
  auto it = graphs.find(key);
  if (it == graphs.end()) {
    std::unique_ptr<Graph> g;
    try {
      backend_.begin_capture();
      try {
        enqueue_phase();
      } catch (...) {
        backend_.end_capture();  // leaves the stream usable; the recording is dropped
        throw;
      }
      g = backend_.end_capture();
    } catch (const Error&) {
      // Eager for good: this micro-batch goes on at its padded shapes (they
      // are staged), every later one unpadded.
      graphs_on_ = false;
      stats_.on = false;
      stats_.capture_failed = true;
      enqueue_phase();
      return;
    }
    it = graphs.emplace(key, std::move(g)).first;
    if (phase == 0) ++stats_.buckets;
  }
  backend_.replay(*it->second);
  if (phase == 1) ++stats_.replayed;
}

void EncoderTrainingRunner::stage(const PackedBatch& batch, std::span<const int32_t> labels,
                                  std::span<const float> targets, bool regression,
                                  const std::optional<TrainBucket>& bucket, uint32_t step) {
  const int64_t T = batch.tokens(), B = batch.sequences();
  // Graph-shaped: Tp token rows (padding: token 0 at position 0, type 0, in
  // sequences of its own) and S sequence slots.
  const int64_t Tp = bucket ? bucket->tokens : T, S = bucket ? bucket->sequences : B;
  // The host buffer of a slot is refilled only after its previous copy ran:
  // flow control, not a sync.
  Staging& slot = staging_[next_slot_];
  next_slot_ = (next_slot_ + 1) % staging_.size();
  if (slot.done && !backend_.event_done(*slot.done)) backend_.throttle(*slot.done);
  auto* host = static_cast<int32_t*>(slot.host->data());
  int32_t* h_ids = host;
  int32_t* h_types = h_ids + Tp;
  int32_t* h_pos = h_types + Tp;
  int32_t* h_cu = h_pos + Tp;
  int32_t* h_rows = h_cu + S + 1;
  int32_t* h_labels = h_rows + B;
  int32_t* h_cu_head = h_labels + B;
  int32_t* h_step = h_cu_head + B + 1;
  std::memcpy(h_ids, batch.ids.data(), static_cast<size_t>(T) * 4);
  std::memcpy(h_types, batch.type_ids.data(), static_cast<size_t>(T) * 4);
  std::memcpy(h_pos, batch.positions.data(), static_cast<size_t>(T) * 4);
  std::fill(h_ids + T, h_ids + Tp, 0);
  std::fill(h_types + T, h_types + Tp, 0);
  std::fill(h_pos + T, h_pos + Tp, 0);
  if (bucket) {
    std::vector<int32_t> cu(batch.cu_seqlens.begin(), batch.cu_seqlens.begin() + B + 1);
    TrainBucketPlan::pad_offsets(*bucket, B, cu);
    std::memcpy(h_cu, cu.data(), static_cast<size_t>(S + 1) * 4);
  } else {
    std::memcpy(h_cu, batch.cu_seqlens.data(), static_cast<size_t>(B + 1) * 4);
  }
  for (int64_t b = 0; b < B; ++b) h_rows[b] = batch.cu_seqlens[static_cast<size_t>(b)];
  if (regression)
    std::memcpy(h_labels, targets.data(), static_cast<size_t>(B) * 4);
  else
    std::memcpy(h_labels, labels.data(), static_cast<size_t>(B) * 4);
  // The head's offsets: the batch's, the last sequence reaching to Tp (cls
  // pooling's backward writes every row of d h[L] and reads only first tokens).
  std::memcpy(h_cu_head, batch.cu_seqlens.data(), static_cast<size_t>(B + 1) * 4);
  h_cu_head[B] = static_cast<int32_t>(Tp);
  std::memcpy(h_step, &step, 4);
  backend_.copy_to_device(ids_, h_ids, static_cast<size_t>(Tp) * 4);
  backend_.copy_to_device(types_, h_types, static_cast<size_t>(Tp) * 4);
  backend_.copy_to_device(positions_, h_pos, static_cast<size_t>(Tp) * 4);
  backend_.copy_to_device(cu_, h_cu, static_cast<size_t>(S + 1) * 4);
  backend_.copy_to_device(rows_, h_rows, static_cast<size_t>(B) * 4);
  backend_.copy_to_device(labels_, h_labels, static_cast<size_t>(B) * 4);
  if (bucket) {
    backend_.copy_to_device(cu_head_, h_cu_head, static_cast<size_t>(B + 1) * 4);
    backend_.copy_to_device(step_, h_step, 4);
  }
  slot.done = backend_.record_event();
}

EncoderTrainingRunner::Step EncoderTrainingRunner::step_views(const PackedBatch& batch, const MicroBatchKnobs& k,
                                                              const std::optional<TrainBucket>& bucket) const {
  const HfConfig& c = enc_.config;
  Step st{k};
  st.T = bucket ? bucket->tokens : batch.tokens();
  st.B = batch.sequences();
  st.maxlen = bucket ? bucket->max_seqlen : batch.max_seqlen;
  st.ids = shaped(ids_, DType::i32, {st.T});
  // No token types (DistilBERT): the embedding ops take no type ids.
  if (!enc_.compute.token_type_embeddings.empty()) st.types = shaped(types_, DType::i32, {st.T});
  st.positions = shaped(positions_, DType::i32, {st.T});
  if (c.arch->family == LayerFamily::prenorm_encoder) st.positions = saved_->zero_pos.vec(st.T);  // ModernBERT: rotary, one zero position row
  st.cu = shaped(cu_, DType::i32, {(bucket ? bucket->sequences : st.B) + 1});
  st.cu_head = bucket ? shaped(cu_head_, DType::i32, {st.B + 1}) : st.cu;
  st.tokens = batch.tokens();
  st.cu_real = shaped(cu_, DType::i32, {st.B + 1});  // the padded offsets begin with the batch's own
  st.layer_step = bucket ? Ops::DropoutStep(shaped(step_, DType::u32, {1})) : Ops::DropoutStep(k.step);
  st.rows = shaped(rows_, DType::i32, {st.B});
  st.labels = shaped(labels_, DType::i32, {st.B});
  st.targets = shaped(labels_, DType::f32, {st.B});
  st.eps = static_cast<float>(c.layer_norm_eps);
  st.heads = static_cast<int>(c.num_attention_heads);
  st.low = enc_.dtype != DType::f32;
  // An embedding model has no head (and an architecture may have none no op computes).
  st.act = enc_.layout.heads() == ParamHeads::classifier ? head_activation(*c.arch) : Activation::none;
  // The head's dropout sites: before its dense (RoBERTa, ELECTRA) and after
  // its activation (all: BERT's pooled output, RoBERTa's dense + tanh).
  st.drop_before_dense = c.arch->head_dropout_before_dense && k.dropout.classifier > 0;
  st.out_site = c.arch->head_dropout_before_dense ? kHeadSite + 1 : kHeadSite;
  return st;
}

TensorView EncoderTrainingRunner::rel_buckets_view(const Step& st) const {
  const int64_t P = enc_.config.max_position_embeddings;
  return TensorView(static_cast<int32_t*>(saved_->rel_buckets->data()) + (P - st.maxlen), DType::i32,
                    {2 * static_cast<int64_t>(st.maxlen) - 1});
}

Ops::AttentionDropout EncoderTrainingRunner::Step::attn_drop(int64_t l) const {
  return Ops::AttentionDropout{knobs.dropout.attention, knobs.seed, layer_step, SequenceTraining::site(l, 0),
                               knobs.token_offset};
}

// ---- forward, keeping what the backward reads
void EncoderTrainingRunner::forward(const Step& st) const {
  const Ops& ops = backend_.ops();
  const EncoderParams& p = enc_.compute;
  Saved& s = *saved_;
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
    in.rel = s.rel.rows(2 * static_cast<int64_t>(st.maxlen) - 1);
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
  embeddings_forward(ops, p, in, project ? s.emb.rows(T) : s.h[0].rows(T), s.h[0].rows(T), TensorView{},
                     s.em.vec(T), s.er.vec(T), &train);
  for (size_t l = 0; l < p.layers.size(); ++l) {
    Saved::LayerSlabs& a = s.layers[l];
    LayerViews v;
    v.x = s.h[l].rows(T);
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
    v.out = s.h[l + 1].rows(T);
    v.m2 = a.m2.vec(T);
    v.r2 = a.r2.vec(T);
    layer_forward(ops, p.layers[l], in, v, static_cast<int64_t>(l), &train);
  }
}

// ---- head and loss: first token, [dropout], dense + activation, dropout,
// output layer (BERT: the pooler is the dense; RoBERTa / ELECTRA: the head's own).
void EncoderTrainingRunner::loss(const Step& st, const TensorView& metrics) const {
  const Ops& ops = backend_.ops();
  const EncoderParams& p = enc_.compute;
  Saved& s = *saved_;
  const int64_t T = st.T, B = st.B;
  const MicroBatchKnobs& k = st.knobs;
  const float pc = k.dropout.classifier;
  const TensorView first = s.first.rows(B), hid = s.pooled.rows(B), hid_drop = s.pooled_drop.rows(B);
  const TensorView head_in = st.drop_before_dense ? s.first_drop.rows(B) : first;
  const TensorView logits = s.logits.rows(B), dlogits = s.dlogits.rows(B);
  ops.gather_rows(first, s.h[p.layers.size()].rows(T), st.rows);
  if (st.drop_before_dense) ops.dropout(head_in, first, pc, k.seed, k.step, kHeadSite, k.sequence_offset);
  if (st.act == Activation::gelu_erf) {  // GELU's backward reads the pre-activation
    ops.linear(hid, head_in, p.head_dense_w, TensorView{}, Activation::none, Accumulate::no);
    ops.bias_gelu_train(hid, s.head_pre.rows(B), p.head_dense_b);
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
void EncoderTrainingRunner::backward_head(const Step& st) const {
  const Ops& ops = backend_.ops();
  const EncoderParams& p = enc_.compute;
  const EncoderParams& g = enc_.grad;
  Saved& s = *saved_;
  const int64_t T = st.T, B = st.B;
  const MicroBatchKnobs& k = st.knobs;
  const float pc = k.dropout.classifier;
  const TensorView first = s.first.rows(B), hid = s.pooled.rows(B), hid_drop = s.pooled_drop.rows(B);
  const TensorView head_in = st.drop_before_dense ? s.first_drop.rows(B) : first;
  const TensorView out_in = pc > 0 ? hid_drop : hid;
  const TensorView g_a = s.g_a.rows(B), g_b = s.g_b.rows(B);
  ops.linear_backward(g_a, g.head_out_w, g.head_out_b, s.dlogits.rows(B), out_in, p.head_out_w,
                      Accumulate::no);  // g_a = d out_in
  if (pc > 0) ops.dropout_backward(g_a, g_a, pc, k.seed, k.step, st.out_site, k.sequence_offset);  // d hid
  if (st.act == Activation::gelu_erf) {
    ops.bias_gelu_backward(g_a, g.head_dense_b, g_a, s.head_pre.rows(B));
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
  ops.pool_backward(s.d_h.rows(T), g_b, TensorView{}, st.cu_head, PoolingMode::cls);
}

void EncoderTrainingRunner::backward_layers(const Step& st) const {
  const Ops& ops = backend_.ops();
  const EncoderParams& p = enc_.compute;
  const EncoderParams& g = enc_.grad;
  Saved& s = *saved_;
  const int64_t T = st.T;
  const MicroBatchKnobs& k = st.knobs;
  const float ph = k.dropout.hidden;
  // The residual adds are folded into the GEMMs (Accumulate::yes): each
  // LayerNorm's backward writes the residual path's gradient straight into
  // the buffer the branch's input GEMM then adds into (dx for d hm, dh for
  // d x), so no separate add pass reads and writes [T, H] twice a layer.
  TensorView dh = s.d_h.rows(T), dx = s.d_x.rows(T);
  const TensorView dt = s.d_t.rows(T), di = s.d_i.rows(T), dqkv = s.d_qkv.rows(T);
  SequenceInputs arch;  // rotary and GLU settings, as the forward took them
  set_architecture_inputs(arch, enc_.config, p);
  const TensorView dgu = arch.gated ? s.d_gu.rows(T) : TensorView{};
  for (size_t li = p.layers.size(); li-- > 0;) {
    const int64_t l = static_cast<int64_t>(li);
    const EncoderLayerParams& w = p.layers[li];
    const EncoderLayerParams& gw = g.layers[li];
    Saved::LayerSlabs& a = s.layers[li];
    const TensorView x_in = st.low ? a.x_low.rows(T) : s.h[li].rows(T);
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
    ops.layernorm_backward(dh, gw.attn_ln_gamma, gw.attn_ln_beta, dx, a.ao.rows(T), s.h[li].rows(T), a.m1.vec(T),
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
      ops.attention_relpos_backward(dqkv, last ? s.d_rel.rows(R) : s.d_rel_l.rows(R), dx, a.qkv.rows(T),
                                    a.ctx.rows(T), a.lse.rows(T), st.cu, st.heads, st.maxlen, s.rel.rows(R),
                                    st.attn_drop(l));
      if (!last) ops.add(s.d_rel.rows(R), s.d_rel_l.rows(R));
    }
    if (!arch.inv_freq.empty()) ops.rotary_backward(dqkv, st.cu, arch.inv_freq, arch.rope);  // d q, d k before rotary
    ops.linear_backward(dh, gw.qkv_w, gw.qkv_b, dqkv, x_in, w.qkv_w, Accumulate::yes);  // dh = d x, both paths
    if (backward_hook_) backward_hook_(l);
  }
  // The relative bias: its rows' gradient into the bucket table.
  if (!p.rel_bias.empty())
    ops.gather_rows_backward(g.rel_bias, s.d_rel.rows(2 * static_cast<int64_t>(st.maxlen) - 1), rel_buckets_view(st));
  // Embeddings: [projection], dropout, LayerNorm, the tables.
  TensorView de = dh;
  if (!p.emb_proj_w.empty()) {
    de = s.d_emb.rows(T);
    ops.linear_backward(de, g.emb_proj_w, g.emb_proj_b, dh, s.emb.rows(T), p.emb_proj_w, Accumulate::no);  // de = d e
  }
  if (ph > 0) ops.dropout_backward(de, de, ph, k.seed, st.layer_step, 0, k.token_offset);
  ops.embed_layernorm_backward(g.word_embeddings, g.position_embeddings, g.token_type_embeddings, g.emb_ln_gamma,
                               g.emb_ln_beta, de, st.ids, st.positions, st.types, p.word_embeddings,
                               p.position_embeddings, p.token_type_embeddings, s.em.vec(T), s.er.vec(T),
                               p.emb_ln_gamma);
  if (backward_hook_) backward_hook_(-1);
}

// ---- ModernBERT (LayerFamily::prenorm_encoder): its sequence, both forms
// and the backward, is model/prenorm_family.h's; here are the workspace's
// views of what it keeps, and its head's training form.
SequenceInputs EncoderTrainingRunner::prenorm_inputs(const Step& st) const {
  SequenceInputs in;
  in.ids = st.ids;
  in.positions = st.positions;
  in.cu = st.cu;
  in.max_seqlen = st.maxlen;
  in.heads = st.heads;
  in.eps = st.eps;
  return in;
}

PrenormTraining EncoderTrainingRunner::prenorm_keep(const Step& st) const {
  Saved& s = *saved_;
  const int64_t T = st.T;
  PrenormTraining keep;
  keep.drop.attention = st.knobs.dropout.attention;
  keep.drop.seed = st.knobs.seed;
  keep.drop.step = st.layer_step;
  keep.drop.token_offset = st.knobs.token_offset;
  keep.drop.low = st.low;
  keep.em = s.em.vec(T);
  keep.er = s.er.vec(T);
  for (size_t l = 0; l < s.pre.size(); ++l) {
    const Saved::LayerSlabs& a = s.layers[l];
    const Saved::PrenormSlabs& q = s.pre[l];
    PrenormLayerKeep k;
    k.h = s.h[l].rows(T);
    if (st.low) {
      k.x_low = a.x_low.rows(T);
      k.xa_low = q.xa_low.rows(T);
      k.xm_low = q.xm_low.rows(T);
    }
    k.qkv = a.qkv.rows(T);
    k.ctx = a.ctx.rows(T);
    k.lse = a.lse.rows(T);
    k.ao = a.ao.rows(T);
    k.xa = q.xa.rows(T);
    k.ma = q.ma.vec(T);
    k.ra = q.ra.vec(T);
    k.xm = q.xm.rows(T);
    k.mm = q.mm.vec(T);
    k.rm = q.rm.vec(T);
    k.gate = q.gate.rows(T);
    k.ffa = a.ffa.rows(T);
    k.next = s.h[l + 1].rows(T);
    keep.layers.push_back(k);
  }
  keep.h_out = s.h_out.rows(T);
  keep.mf = s.mf.vec(T);
  keep.rf = s.rf.vec(T);
  return keep;
}

void EncoderTrainingRunner::forward_prenorm(const Step& st) const {
  const PrenormTraining keep = prenorm_keep(st);
  prenorm_encoder_forward(backend_.ops(), enc_.compute, enc_.config, prenorm_inputs(st), PrenormViews{}, &keep);
}

// Head: pooled (first token or mean), dense, GELU, LayerNorm, [dropout], classifier.
void EncoderTrainingRunner::loss_prenorm(const Step& st, const TensorView& metrics) const {
  const Ops& ops = backend_.ops();
  const HfConfig& c = enc_.config;
  const EncoderParams& p = enc_.compute;
  Saved& s = *saved_;
  const int64_t B = st.B;
  const MicroBatchKnobs& k = st.knobs;
  const float pc = k.dropout.classifier;
  const TensorView pooled = s.first.rows(B), hid = s.pooled.rows(B), ln = s.head_ln.rows(B);
  const TensorView out_in = pc > 0 ? s.pooled_drop.rows(B) : ln;
  ops.pool(pooled, s.h_out.rows(st.tokens), st.cu_real,
           c.classifier_mean_pooling ? PoolingMode::mean : PoolingMode::cls);  // the real rows only
  ops.linear(hid, pooled, p.head_dense_w, TensorView{}, Activation::none, Accumulate::no);
  ops.bias_gelu_train(hid, s.head_pre.rows(B), TensorView{});
  ops.residual_layernorm_train(ln, s.head_m.vec(B), s.head_r.vec(B), hid, s.zero_rows.rows(B), p.head_norm, p.zeros,
                               st.eps);
  if (pc > 0) ops.dropout(out_in, ln, pc, k.seed, k.step, kHeadSite, k.sequence_offset);
  ops.linear(s.logits.rows(B), out_in, p.head_out_w, p.head_out_b, Activation::none, Accumulate::no);
  if (k.regression)
    ops.mse_loss(s.dlogits.rows(B), metrics, s.logits.rows(B), st.targets, k.loss_scale);
  else
    ops.cross_entropy(s.dlogits.rows(B), metrics, s.logits.rows(B), st.labels, k.label_smoothing, k.loss_scale);
  if (!k.loss_scaler.empty()) ops.loss_scale_multiply(s.dlogits.rows(B), k.loss_scaler);
}

// The head's backward, down to d h_out (in d_x).
void EncoderTrainingRunner::backward_prenorm_head(const Step& st) const {
  const Ops& ops = backend_.ops();
  const HfConfig& c = enc_.config;
  const EncoderParams& p = enc_.compute;
  const EncoderParams& g = enc_.grad;
  Saved& s = *saved_;
  const int64_t T = st.T, B = st.B;
  const MicroBatchKnobs& k = st.knobs;
  const float pc = k.dropout.classifier;
  const TensorView pooled = s.first.rows(B), hid = s.pooled.rows(B), ln = s.head_ln.rows(B);
  const TensorView out_in = pc > 0 ? s.pooled_drop.rows(B) : ln;
  const TensorView g_a = s.g_a.rows(B), g_b = s.g_b.rows(B);
  ops.linear_backward(g_a, g.head_out_w, g.head_out_b, s.dlogits.rows(B), out_in, p.head_out_w,
                      Accumulate::no);                                                                // d out_in
  if (pc > 0) ops.dropout_backward(g_a, g_a, pc, k.seed, k.step, kHeadSite, k.sequence_offset);      // d ln
  ops.layernorm_backward(g_b, g.head_norm, TensorView{}, g_a, hid, s.zero_rows.rows(B), s.head_m.vec(B),
                         s.head_r.vec(B), p.head_norm, Accumulate::no);                               // d GELU out
  ops.bias_gelu_backward(g_b, TensorView{}, g_b, s.head_pre.rows(B));
  ops.linear_backward(g_a, g.head_dense_w, TensorView{}, g_b, pooled, p.head_dense_w, Accumulate::no);  // d pooled
  // d h_out: the pooled rows' gradient, every other row (padding too) 0.
  // cu_head reaches the last row (padding included) for the first-token
  // pooling; a mean over the real rows writes the padding's zeros first.
  const TensorView dx = s.d_x.rows(T);
  if (!c.classifier_mean_pooling) {
    ops.pool_backward(dx, g_a, s.h_out.rows(T), st.cu_head, PoolingMode::cls);
  } else {
    if (st.tokens < T) ops.pool_backward(dx, s.zero_rows.rows(B), TensorView{}, st.cu_head, PoolingMode::cls);
    ops.pool_backward(s.d_x.rows(st.tokens), g_a, s.h_out.rows(st.tokens), st.cu_real, PoolingMode::mean);
  }
}

// The encoder's backward from d h_out (in d_x): the final norm, the layers, the embeddings.
void EncoderTrainingRunner::backward_prenorm_layers(const Step& st) const {
  Saved& s = *saved_;
  const int64_t T = st.T;
  PrenormGrads d;
  d.dh = s.d_h.rows(T);
  d.dx = s.d_x.rows(T);
  d.di = s.d_i.rows(T);
  d.dqkv = s.d_qkv.rows(T);
  d.dgate = s.d_gate.rows(T);
  prenorm_encoder_backward(backend_.ops(), enc_.compute, enc_.grad, enc_.config, prenorm_inputs(st), prenorm_keep(st),
                           d, backward_hook_);
  if (backward_hook_) backward_hook_(-1);
}

}  // namespace stoke
