#include "train/embedding_task.h"

#include <algorithm>
#include <cstring>

#include "core/crash_point.h"
#include "core/error.h"
#include "train/embedding_eval_metrics.h"

namespace stoke::train {

EmbeddingTask::EmbeddingTask(TrainableEncoder& encoder, Backend& backend, const EmbeddingTaskOptions& options,
                             const ContrastiveDataset& data, const std::vector<Example>& texts,
                             const EvalSet* eval, const std::vector<Example>* eval_texts)
    : enc_(encoder),
      backend_(backend),
      o_(options),
      data_(data),
      texts_(texts),
      eval_(eval),
      eval_texts_(eval_texts) {
  if (o_.objective == Objective::classify) throw Error(Errc::internal, "EmbeddingTask: the classifier objective");
  if (o_.comm) {
    ranks_ = o_.comm->size();
    rank_ = o_.comm->rank();
  }
  if (texts_.size() != data_.texts.size()) throw Error(Errc::internal, "EmbeddingTask: texts not tokenized");
  std::vector<int64_t> lengths;
  for (const Example& t : texts_) lengths.push_back(static_cast<int64_t>(t.ids.size()));
  for (int64_t n : lengths) longest_ = std::max(longest_, n);
  // The most tokens one rank's share of a step can hold: its batch_size x
  // groups longest texts.
  std::sort(lengths.begin(), lengths.end(), std::greater<>());
  const size_t share = static_cast<size_t>(o_.batch_size * groups());
  for (size_t i = 0; i < lengths.size() && i < share; ++i) step_tokens_ += lengths[i];
  width_ = enc_.sentence_width();
  for (int64_t d : o_.matryoshka_dims)
    if (d <= 0 || d > width_)
      throw Error(Errc::invalid_argument, "--matryoshka-dims " + std::to_string(d) + ": expected 1 to the embedding's " +
                                              std::to_string(width_) + " dimensions");
}

EmbeddingTask::~EmbeddingTask() { backend_.drain(); }

uint64_t EmbeddingTask::tokens_of(uint32_t i) const {
  uint64_t n = 0;
  for (uint32_t t : data_.examples[i].texts) n += texts_[t].ids.size();
  return n;
}

std::vector<std::vector<uint32_t>> EmbeddingTask::epoch_batches(int64_t batch, int64_t epoch) const {
  return no_duplicate_batches(data_, batch, o_.shuffle, o_.seed, epoch);
}

int64_t EmbeddingTask::piece(int halvings) const {
  const int64_t base = o_.mini_batch_tokens > 0 ? std::min(o_.mini_batch_tokens, step_tokens_) : step_tokens_;
  return std::max(longest_, base >> std::min(halvings, 62));
}

bool EmbeddingTask::can_halve(int halvings, std::string* why) const {
  if (piece(halvings) > longest_) return true;
  *why = "not even the longest training text, of " + std::to_string(longest_) +
         " tokens, fits the device alone; try a shorter --max-length";
  return false;
}

void EmbeddingTask::release_workspace() {
  runner_.reset();
  emb_.reset();
  d_emb_.reset();
  workspace_.reset();
  pooled_.reset();
  d_pooled_.reset();
  dense_out_.clear();
  d_dense_out_.clear();
}

void EmbeddingTask::make_workspace(int halvings) {
  release_workspace();
  budget_ = piece(halvings);
  crash_point("train_workspace");
  const int64_t rows = o_.batch_size * ranks_ * groups();  // the global step's embedding matrix
  const int64_t H = enc_.config.hidden_size;
  // A mini-batch holds at most `budget_` tokens, so at most that many texts.
  const int64_t sequences = std::min<int64_t>(budget_, o_.batch_size * groups());
  runner_ = std::make_unique<EncoderTrainingRunner>(enc_, backend_, budget_, sequences);
  const int64_t W = width_;
  emb_ = backend_.allocate(static_cast<size_t>(rows * W) * 4);
  d_emb_ = backend_.allocate(static_cast<size_t>(rows * W) * 4);
  const std::vector<DenseLayerParams>& dense = enc_.dense_master;
  if (!dense.empty()) {
    pooled_ = backend_.allocate(static_cast<size_t>(rows * H) * 4);
    d_pooled_ = backend_.allocate(static_cast<size_t>(rows * H) * 4);
    for (size_t i = 0; i + 1 < dense.size(); ++i) {
      const size_t bytes = static_cast<size_t>(rows * dense[i].w.dim(0)) * 4;
      dense_out_.push_back(backend_.allocate(bytes));
      d_dense_out_.push_back(backend_.allocate(bytes));
    }
  }
  workspace_floats_ = std::max<int64_t>(embedding_loss_workspace_floats(o_.batch_size * ranks_, groups(), W), 1);
  workspace_ = backend_.allocate(static_cast<size_t>(workspace_floats_) * 4);
  if (!zeros_) {
    zeros_ = backend_.allocate_host(static_cast<size_t>(rows * W) * 4);
    std::memset(zeros_->data(), 0, static_cast<size_t>(rows * W) * 4);
    scores_ = backend_.allocate(static_cast<size_t>(std::max<int64_t>(o_.batch_size * ranks_, 1)) * 4);
    scores_host_ = backend_.allocate_host(static_cast<size_t>(std::max<int64_t>(o_.batch_size * ranks_, 1)) * 4);
  }
}

// Row r of a step's matrix: group r / n, example r % n of the global batch.
uint32_t EmbeddingTask::text_of(const std::vector<uint32_t>& global, int64_t row) const {
  const int64_t n = static_cast<int64_t>(global.size());
  return data_.examples[global[static_cast<size_t>(row % n)]].texts[static_cast<size_t>(row / n)];
}

std::vector<EmbeddingTask::MiniBatch> EmbeddingTask::plan(const std::vector<uint32_t>& global, int64_t n) const {
  // This rank's examples [first, last) of the global batch: its rows are
  // those examples' rows of every group (one run of rows per group).
  const int64_t first = std::min<int64_t>(n, rank_ * o_.batch_size);
  const int64_t last = std::min<int64_t>(n, first + o_.batch_size);
  std::vector<MiniBatch> out;
  uint64_t offset = 0;  // tokens of the global packing before the row
  int64_t row = 0;
  for (int64_t g = 0; g < groups(); ++g) {
    for (int64_t b = 0; b < n; ++b, ++row) {
      const uint64_t len = texts_[text_of(global, row)].ids.size();
      if (b >= first && b < last) {
        const bool fits = !out.empty() && out.back().row + out.back().rows == row &&
                          offset - out.back().token_offset + len <= static_cast<uint64_t>(budget_);
        if (fits)
          ++out.back().rows;
        else
          out.push_back(MiniBatch{row, 1, offset});
      }
      offset += len;
    }
  }
  return out;
}

PackedBatch EmbeddingTask::pack(const std::vector<uint32_t>& global, const MiniBatch& m) const {
  PackedBatch batch;
  batch.clear();
  for (int64_t r = m.row; r < m.row + m.rows; ++r) {
    const Example& t = texts_[text_of(global, r)];
    batch.add(t.ids, t.type_ids, enc_.config);
  }
  return batch;
}

MicroBatchKnobs EmbeddingTask::knobs(const MicroBatchPlace& place, const MiniBatch& m) const {
  MicroBatchKnobs k;
  k.dropout = o_.dropout;
  k.dropout.classifier = 0;  // no head
  k.seed = o_.seed;
  k.step = place.step;
  k.token_offset = m.token_offset;
  k.sequence_offset = static_cast<uint64_t>(m.row);
  return k;
}

void EmbeddingTask::gather_embeddings(int64_t rows_global, const std::vector<MiniBatch>& own) {
  // Each rank sends its rows (padded to batch_size per group, so every rank
  // sends the same size) and writes the others' into its matrix.
  const int64_t H = width_, n = rows_global / groups();
  const int64_t share = o_.batch_size * groups() * H;
  std::vector<float> mine(static_cast<size_t>(share), 0.0f);
  gather_host_.resize(static_cast<size_t>(rows_global * H));
  backend_.copy_to_host(gather_host_.data(), emb_->data(), static_cast<size_t>(rows_global * H) * 4);
  backend_.wait(*backend_.record_event());
  for (const MiniBatch& m : own) {
    const int64_t g = m.row / n, b = m.row % n - rank_ * o_.batch_size;
    std::memcpy(mine.data() + (g * o_.batch_size + b) * H, gather_host_.data() + m.row * H,
                static_cast<size_t>(m.rows * H) * 4);
  }
  const std::vector<uint8_t> all = o_.comm->allgather(mine.data(), mine.size() * 4);
  const auto* from = reinterpret_cast<const float*>(all.data());
  for (int r = 0; r < ranks_; ++r)
    for (int64_t g = 0; g < groups(); ++g)
      for (int64_t b = 0; b < o_.batch_size; ++b) {
        const int64_t example = r * o_.batch_size + b;
        if (example >= n) break;
        std::memcpy(gather_host_.data() + (g * n + example) * H, from + ((r * groups() + g) * o_.batch_size + b) * H,
                    static_cast<size_t>(H) * 4);
      }
  backend_.copy_to_device(emb_->data(), gather_host_.data(), static_cast<size_t>(rows_global * H) * 4);
}

void EmbeddingTask::enqueue_loss(int64_t n, const std::vector<uint32_t>& global, const MicroBatchPlace& place,
                                 const TensorView& metrics) {
  const Ops& ops = backend_.ops();
  const int64_t H = width_, rows = n * groups();
  const TensorView emb(emb_->data(), DType::f32, {rows, H}), d_emb(d_emb_->data(), DType::f32, {rows, H});
  TensorView scores{};
  if (objective_takes_scores(o_.objective)) {
    if (scores_copied_ && !backend_.event_done(*scores_copied_)) backend_.throttle(*scores_copied_);
    auto* host = static_cast<float*>(scores_host_->data());
    for (int64_t b = 0; b < n; ++b) host[b] = data_.examples[global[static_cast<size_t>(b)]].score;
    backend_.copy_to_device(scores_->data(), host, static_cast<size_t>(n) * 4);
    scores_copied_ = backend_.record_event();
    scores = TensorView(scores_->data(), DType::f32, {n});
  }
  backend_.copy_to_device(d_emb_->data(), zeros_->data(), static_cast<size_t>(rows * H) * 4);
  Ops::EmbeddingLoss loss;
  switch (o_.objective) {
    case Objective::mnrl: loss.kind = Ops::EmbeddingLoss::Kind::mnrl; break;
    case Objective::mnrl_symmetric: loss.kind = Ops::EmbeddingLoss::Kind::mnrl_symmetric; break;
    case Objective::cosent: loss.kind = Ops::EmbeddingLoss::Kind::cosent; break;
    case Objective::cosine_mse: loss.kind = Ops::EmbeddingLoss::Kind::cosine_mse; break;
    case Objective::classify: break;
  }
  loss.groups = groups();
  loss.scale = o_.scale;
  // The mean over the step's accumulated contrastive batches (HF's
  // gradient accumulation divides each batch's loss by their number).
  loss.grad_scale = 1.0f / static_cast<float>(place.micro_batches);
  // Ranks: the metric sums are rank 0's alone (every rank computes the
  // whole global loss).
  const TensorView m = rank_ == 0 ? metrics : TensorView{};
  const TensorView work(workspace_->data(), DType::f32, {workspace_floats_});
  if (o_.matryoshka_dims.empty()) {
    loss.dims = 0;
    // Cosine similarity, or dot products of a Normalize module's unit vectors.
    loss.normalize = o_.cosine || o_.model_normalizes;
    ops.embedding_loss(d_emb, m, emb, scores, work, loss);
  } else {
    // MatryoshkaLoss: each prefix truncated and normalized (its shrink), the
    // losses summed with their weights; the first counts the examples.
    for (size_t i = 0; i < o_.matryoshka_dims.size(); ++i) {
      loss.dims = o_.matryoshka_dims[i];
      loss.normalize = true;
      loss.weight = i < o_.matryoshka_weights.size() ? o_.matryoshka_weights[i] : 1.0f;
      loss.count = i == 0;
      ops.embedding_loss(d_emb, m, emb, scores, work, loss);
    }
  }
  if (!place.loss_scaler.empty()) ops.loss_scale_multiply(d_emb, place.loss_scaler);  // f16: the scaled loss's gradient
}

TensorView EmbeddingTask::rows(const Buffer& b, const MiniBatch& m, int64_t width) const {
  return TensorView(static_cast<float*>(b.data()) + m.row * width, DType::f32, {m.rows, width});
}

void EmbeddingTask::enqueue_dense_forward(const MiniBatch& m) {
  const Ops& ops = backend_.ops();
  const std::vector<DenseLayerParams>& dense = enc_.dense_master;
  TensorView x = rows(*pooled_, m, enc_.config.hidden_size);  // [rows, H]
  for (size_t i = 0; i < dense.size(); ++i) {
    const DenseLayerParams& d = dense[i];
    const bool last = i + 1 == dense.size();
    const TensorView y = rows(last ? *emb_ : *dense_out_[i], m, d.w.dim(0));  // [rows, out_i]
    ops.linear(y, x, d.w, d.b, d.act, Accumulate::no);  // y = act(x W^T + b)
    x = y;
  }
}

void EmbeddingTask::enqueue_dense_backward(const MiniBatch& m) {
  const Ops& ops = backend_.ops();
  const std::vector<DenseLayerParams>& dense = enc_.dense_master;
  const int64_t H = enc_.config.hidden_size;
  for (size_t i = dense.size(); i-- > 0;) {
    const DenseLayerParams& d = dense[i];
    const bool last = i + 1 == dense.size();
    const int64_t out = d.w.dim(0), in = d.w.dim(1);
    const TensorView y = rows(last ? *emb_ : *dense_out_[i], m, out);     // the forward's output
    const TensorView dy = rows(last ? *d_emb_ : *d_dense_out_[i], m, out);
    const TensorView x = i == 0 ? rows(*pooled_, m, H) : rows(*dense_out_[i - 1], m, in);
    const TensorView dx = i == 0 ? rows(*d_pooled_, m, H) : rows(*d_dense_out_[i - 1], m, in);
    if (d.act == Activation::tanh) ops.tanh_backward(dy, dy, y);  // d u, in place
    // d x written; d W, d b added (+=) into the layout's gradient.
    ops.linear_backward(dx, enc_.dense_grad[i].w, enc_.dense_grad[i].b, dy, x, d.w, Accumulate::no);
  }
}

void EmbeddingTask::enqueue(const std::vector<uint32_t>& global, const MicroBatchPlace& place,
                            const TensorView& metrics) {
  const int64_t n = static_cast<int64_t>(global.size()), H = enc_.config.hidden_size;
  if (n == 0) return;
  const std::vector<MiniBatch> minis = plan(global, n);
  last_mini_batches_ = static_cast<int64_t>(minis.size());
  // The runner pools into pooled_ ([rows, H]) where Dense modules follow, else into emb_.
  const bool dense = !enc_.dense_master.empty();
  auto pooled_rows = [&](const MiniBatch& m) { return rows(dense ? *pooled_ : *emb_, m, H); };
  auto d_pooled_rows = [&](const MiniBatch& m) { return rows(dense ? *d_pooled_ : *d_emb_, m, H); };
  // Pass 1: every mini-batch's embeddings (the plain step: the only one).
  std::vector<PackedBatch> packed;
  packed.reserve(minis.size());
  for (const MiniBatch& m : minis) {
    crash_point("train_micro_batch");
    packed.push_back(pack(global, m));
    runner_->enqueue_embedding_forward(packed.back(), knobs(place, m), o_.pooling, pooled_rows(m));
    // The Dense outputs stay in their step-sized buffers for the backward.
    if (dense) enqueue_dense_forward(m);
  }
  if (ranks_ > 1) gather_embeddings(n * groups(), minis);
  enqueue_loss(n, global, place, metrics);
  // Pass 2, last mini-batch first: its activations are the runner's now.
  for (size_t i = minis.size(); i-- > 0;) {
    const MiniBatch& m = minis[i];
    const MicroBatchKnobs k = knobs(place, m);
    if (i + 1 != minis.size()) runner_->enqueue_embedding_forward(packed[i], k, o_.pooling, pooled_rows(m));
    if (dense) enqueue_dense_backward(m);
    if (place.backward_hook && i == 0) runner_->set_backward_hook(place.backward_hook);
    runner_->enqueue_embedding_backward(packed[i], k, o_.pooling, d_pooled_rows(m));
    runner_->set_backward_hook(nullptr);
  }
}

std::vector<std::string> eval_set_texts(const EvalSet& set) {
  std::vector<std::string> out;
  if (set.kind == EvalSetKind::scored_pairs) {
    out = set.pairs.sentences1;
    out.insert(out.end(), set.pairs.sentences2.begin(), set.pairs.sentences2.end());
  } else {
    out = set.retrieval.queries;
    out.insert(out.end(), set.retrieval.corpus.begin(), set.retrieval.corpus.end());
  }
  return out;
}

std::vector<std::pair<std::string, double>> eval_set_metrics(const EvalSet& set, const float* rows, size_t dim) {
  if (set.kind == EvalSetKind::scored_pairs) {
    const size_t n = set.pairs.scores.size();
    return scored_pair_metrics(EmbeddingRows{rows, n, dim}, EmbeddingRows{rows + n * dim, n, dim}, set.pairs.scores)
        .values;
  }
  const RetrievalEvalSet& r = set.retrieval;
  const size_t q = r.queries.size();
  return retrieval_metrics(EmbeddingRows{rows, q, dim}, EmbeddingRows{rows + q * dim, r.corpus.size(), dim}, r.relevant,
                           r.corpus_tie_rank)
      .values;
}

std::optional<EvalMetrics> EmbeddingTask::evaluate() {
  if (!eval_ || !eval_texts_ || eval_texts_->empty()) return std::nullopt;
  const LoadedEncoder view = enc_.inference_view();
  const int64_t H = width_;  // the sentence embedding's width (after the Dense modules)
  int64_t longest = 0;
  for (const Example& e : *eval_texts_) longest = std::max<int64_t>(longest, static_cast<int64_t>(e.ids.size()));
  // Batches of up to the training mini-batch's tokens (and at least one text).
  const int64_t tokens = std::max(budget_ > 0 ? budget_ : step_tokens_, longest);
  const int64_t sequences = std::max<int64_t>(1, std::min<int64_t>(tokens, 256));
  EncoderRunner runner(view, backend_, tokens, sequences, 3);
  std::vector<float> emb(eval_texts_->size() * static_cast<size_t>(H));
  std::shared_ptr<Event> last;
  PackedBatch batch;
  batch.clear();
  size_t first = 0;
  auto flush = [&](size_t end) {
    if (end == first) return;
    EncoderOutputs out;
    out.pooled = emb.data() + first * static_cast<size_t>(H);
    out.pooling = o_.pooling;
    last = runner.run(batch, out);
    batch.clear();
    first = end;
  };
  for (size_t i = 0; i < eval_texts_->size(); ++i) {
    const Example& t = (*eval_texts_)[i];
    if (batch.sequences() > 0 && (batch.tokens() + static_cast<int64_t>(t.ids.size()) > tokens ||
                                  batch.sequences() + 1 > sequences))
      flush(i);
    batch.add(t.ids, t.type_ids, enc_.config);
  }
  flush(eval_texts_->size());
  if (last) backend_.wait(*last);  // one wait for the whole evaluation
  EvalMetrics m;
  m.examples = static_cast<int64_t>(eval_->kind == EvalSetKind::scored_pairs ? eval_->pairs.scores.size()
                                                                            : eval_->retrieval.queries.size());
  m.named = eval_set_metrics(*eval_, emb.data(), static_cast<size_t>(H));
  return m;
}


EncoderTrainingRunner::GraphStats EmbeddingTask::graph_stats() const {
  return runner_ ? runner_->graph_stats() : EncoderTrainingRunner::GraphStats{};
}

}  // namespace stoke::train
