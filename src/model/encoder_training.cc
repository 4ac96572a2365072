#include "model/encoder_training.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "model/post_ln_family.h"
#include "model/prenorm_family.h"

namespace stoke {

namespace {

TensorView shaped(void* data, DType t, std::initializer_list<int64_t> shape) { return TensorView(data, t, shape); }

}  // namespace

EncoderTrainingRunner::EncoderTrainingRunner(const TrainableEncoder& encoder, Backend& backend, int64_t max_tokens,
                                             int64_t max_sequences, size_t staging_slots)
    : enc_(encoder),
      backend_(backend),
      max_tokens_(max_tokens),
      max_sequences_(max_sequences),
      staging_(staging_slots < 1 ? 1 : staging_slots),
      plan_(std::max<int64_t>(max_tokens, 1), std::max<int64_t>(max_sequences, 1),
            std::max<int64_t>(encoder.config.usable_positions(), 1)) {
  if (max_tokens <= 0 || max_sequences <= 0) throw Error(Errc::invalid_argument, "training workspace must be positive");
  const HfConfig& c = enc_.config;
  const int64_t T = max_tokens, B = max_sequences;
  // The layer family's workspace: the one place the runner asks which family it trains.
  switch (c.arch->family) {
    case LayerFamily::post_ln_encoder:  // model/post_ln_family.h
      family_ = std::make_unique<PostLnTrainer>(enc_, backend_, T, B);
      break;
    case LayerFamily::prenorm_encoder:  // model/prenorm_family.h
      family_ = std::make_unique<PrenormTrainer>(enc_, backend_, T, B);
      break;
    case LayerFamily::decoder:  // inference only
      refuse_decoder_training(*c.arch);
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
  switch (c.arch->family) {
    case LayerFamily::post_ln_encoder: return PostLnTrainer::bytes_per_token(c, dt);
    case LayerFamily::prenorm_encoder: return PrenormTrainer::bytes_per_token(c, dt);
    case LayerFamily::decoder: break;
  }
  refuse_decoder_training(*c.arch);
}

int64_t EncoderTrainingRunner::bytes_per_sequence(const HfConfig& c) {
  switch (c.arch->family) {
    case LayerFamily::post_ln_encoder: return PostLnTrainer::bytes_per_sequence(c);
    case LayerFamily::prenorm_encoder: return PrenormTrainer::bytes_per_sequence(c);
    case LayerFamily::decoder: break;
  }
  refuse_decoder_training(*c.arch);
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
  const TrainStep st = step_views(batch, k, bucket);
  // The family's phases: the encoder forward, the head (its loss and its
  // backward down to the encoder's output gradient), the encoder backward.
  const auto encoder_forward = [&] { family_->forward(st); };
  const auto head = [&] {
    family_->loss(st, metrics);
    family_->backward_head(st);
  };
  const auto encoder_backward = [&] { backward(st); };
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
  family_->check(k);
}

void EncoderTrainingRunner::backward(const TrainStep& st) const {
  family_->backward(st, backward_hook_);
  if (backward_hook_) backward_hook_(-1);
}

void EncoderTrainingRunner::enqueue_embedding_forward(const PackedBatch& batch, const MicroBatchKnobs& k,
                                                      Pooling pooling, const TensorView& out) {
  const int64_t B = batch.sequences();
  if (B == 0) return;
  check_micro_batch(batch, k);
  if (out.rank != 2 || out.dim(0) != B || out.dim(1) != enc_.config.hidden_size || out.dtype != DType::f32)
    throw Error(Errc::invalid_argument, "embedding forward: out must be f32 [B, hidden]");
  const std::vector<int32_t> no_labels(static_cast<size_t>(B), 0);
  stage(batch, no_labels, {}, false, std::nullopt, k.step);
  const TrainStep st = step_views(batch, k, std::nullopt);
  ++stats_.eager;
  family_->forward(st);
  backend_.ops().pool(out, family_->last_hidden(st.T), st.cu, pooling);
}

void EncoderTrainingRunner::enqueue_embedding_backward(const PackedBatch& batch, const MicroBatchKnobs& k,
                                                       Pooling pooling, const TensorView& d_out) {
  const int64_t B = batch.sequences();
  if (B == 0) return;
  check_micro_batch(batch, k);
  if (d_out.rank != 2 || d_out.dim(0) != B || d_out.dim(1) != enc_.config.hidden_size || d_out.dtype != DType::f32)
    throw Error(Errc::invalid_argument, "embedding backward: d_out must be f32 [B, hidden]");
  const TrainStep st = step_views(batch, k, std::nullopt);
  // d of the last hidden state: the pooled rows' gradient spread back
  // (pool_backward writes every row), where the family's backward starts.
  backend_.ops().pool_backward(family_->d_last_hidden(st.T), d_out, family_->last_hidden(st.T), st.cu, pooling);
  backward(st);
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

TrainStep EncoderTrainingRunner::step_views(const PackedBatch& batch, const MicroBatchKnobs& k,
                                            const std::optional<TrainBucket>& bucket) const {
  const HfConfig& c = enc_.config;
  TrainStep st{k};
  st.T = bucket ? bucket->tokens : batch.tokens();
  st.B = batch.sequences();
  st.maxlen = bucket ? bucket->max_seqlen : batch.max_seqlen;
  st.ids = shaped(ids_, DType::i32, {st.T});
  // No token types (DistilBERT): the embedding ops take no type ids.
  if (!enc_.compute.token_type_embeddings.empty()) st.types = shaped(types_, DType::i32, {st.T});
  st.positions = shaped(positions_, DType::i32, {st.T});
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

}  // namespace stoke
