// An embedding model as a training task (train/train_task.h): the
// contrastive objectives of sentence-transformers (MultipleNegativesRanking,
// its symmetric form, CoSENT, CosineSimilarity; each optionally summed over
// Matryoshka prefixes) on the pooled last hidden state, passed through the
// model's sentence-transformers Dense modules where it has them (trained with
// the encoder), with GradCache for contrastive batches larger than memory.
//
// A step's texts — the batch's anchors, then its positives, then each
// negative column (the op's groups, backend/op_list.h embedding_loss) — are
// packed in that order and cut into mini-batches of at most
// mini_batch_tokens tokens. When the whole batch is one mini-batch, the step
// is the plain one: forward, loss, backward. Otherwise (GradCache): every
// mini-batch's forward, pooled into the batch's embedding matrix (each
// mini-batch's activations dropped as the next one runs); the loss and its
// gradient with respect to every embedding; then each mini-batch's forward
// again and its backward from its rows of that gradient. Dropout masks are
// keyed by each token's place in the whole step's packing (as a
// data-parallel slice's are), so the second forward draws the first one's
// masks and the step equals the plain one to f32 rounding. The last
// mini-batch's activations are still there after the loss: its second
// forward is skipped.
//
// Data parallelism: each rank embeds its share of the global batch; the
// embeddings are gathered (through the host: one wait per step), every rank
// computes the loss over the global batch — negatives from every rank, as
// sentence-transformers' gather_across_devices — and back-propagates its own
// rows; the gradient all-reduce sums the ranks' parts into the global step's.
#pragma once

#include <memory>
#include <vector>

#include "dist/communicator.h"
#include "train/contrastive_data.h"
#include "train/embedding_eval_data.h"
#include "train/train_task.h"

namespace stoke::train {

struct EmbeddingTaskOptions {
  Objective objective = Objective::mnrl;
  float scale = 20.0f;                // similarity x scale (mnrl kinds, cosent)
  bool cosine = true;                 // cosine similarity (false: dot product)
  bool model_normalizes = false;      // the model ends in a Normalize module (dot products of unit vectors)
  std::vector<int64_t> matryoshka_dims;  // empty: the whole vector only
  std::vector<float> matryoshka_weights;  // one per dim (default 1)
  Pooling pooling = Pooling::mean;
  int64_t batch_size = 8;             // per rank: anchors whose texts are embedded on this rank
  int64_t mini_batch_tokens = 0;      // > 0: at most this many tokens in memory at once (GradCache); 0: the whole batch
  bool shuffle = true;
  uint64_t seed = 42;
  DropoutRates dropout;               // the layers' (there is no head)
  dist::Communicator* comm = nullptr; // ranks > 1: gather the embeddings
};

// An evaluation set's texts in the order the task embeds them: queries then
// corpus (retrieval sets), first sentences then second (scored pairs).
std::vector<std::string> eval_set_texts(const EvalSet& set);
// The evaluator's metrics from those texts' embeddings (rows [n, dim], in eval_set_texts' order).
std::vector<std::pair<std::string, double>> eval_set_metrics(const EvalSet& set, const float* rows, size_t dim);

class EmbeddingTask final : public TrainTask {
 public:
  // texts: data.texts tokenized (train/contrastive_data.h tokenize_texts).
  // eval / eval_texts: an evaluation set and eval_set_texts(*eval) tokenized (may be null).
  EmbeddingTask(TrainableEncoder& encoder, Backend& backend, const EmbeddingTaskOptions& options,
                const ContrastiveDataset& data, const std::vector<Example>& texts, const EvalSet* eval,
                const std::vector<Example>* eval_texts);
  ~EmbeddingTask() override;
  size_t examples() const override { return data_.examples.size(); }
  uint64_t tokens_of(uint32_t i) const override;
  std::vector<std::vector<uint32_t>> epoch_batches(int64_t batch, int64_t epoch) const override;
  void make_workspace(int halvings) override;
  void release_workspace() override;
  bool can_halve(int halvings, std::string* why) const override;
  int64_t piece(int halvings) const override;
  void enqueue(const std::vector<uint32_t>& global, const MicroBatchPlace& place, const TensorView& metrics) override;
  std::optional<EvalMetrics> evaluate() override;
  EncoderTrainingRunner::GraphStats graph_stats() const override;
  bool reports_accuracy() const override { return !objective_takes_scores(o_.objective); }

  // The text groups of a step (anchor, positive, negatives...).
  int64_t groups() const { return static_cast<int64_t>(data_.columns.size()); }
  // Mini-batches the last enqueued step ran as (1: the plain step).
  int64_t last_mini_batches() const { return last_mini_batches_; }

 private:
  struct MiniBatch {
    int64_t row = 0, rows = 0;  // rows [row, row + rows) of the step's embedding matrix
    uint64_t token_offset = 0;  // tokens of the step's packing before it
  };
  // This rank's rows of a global micro-batch of `examples`, cut into mini-batches.
  std::vector<MiniBatch> plan(const std::vector<uint32_t>& global, int64_t examples) const;
  uint32_t text_of(const std::vector<uint32_t>& global, int64_t row) const;
  PackedBatch pack(const std::vector<uint32_t>& global, const MiniBatch& m) const;
  MicroBatchKnobs knobs(const MicroBatchPlace& place, const MiniBatch& m) const;
  void gather_embeddings(int64_t rows_global, const std::vector<MiniBatch>& own);
  void enqueue_loss(int64_t anchors, const std::vector<uint32_t>& global, const MicroBatchPlace& place,
                    const TensorView& metrics);
  // The Dense modules of one mini-batch's rows: pooled -> ... -> emb_, and
  // back from d_emb_ to d_pooled_ (parameter gradients added, +=).
  void enqueue_dense_forward(const MiniBatch& m);
  void enqueue_dense_backward(const MiniBatch& m);
  TensorView rows(const Buffer& b, const MiniBatch& m, int64_t width) const;

  TrainableEncoder& enc_;
  Backend& backend_;
  EmbeddingTaskOptions o_;
  const ContrastiveDataset& data_;
  const std::vector<Example>& texts_;
  const EvalSet* eval_;
  const std::vector<Example>* eval_texts_;
  int64_t width_ = 0;                      // the sentence embedding's: the last Dense module's out_features, else H
  int64_t longest_ = 0, step_tokens_ = 0;  // the longest text; the most tokens one rank's share of a step can have
  int ranks_ = 1, rank_ = 0;
  int64_t budget_ = 0;                     // tokens per mini-batch (the workspace's)
  int64_t workspace_floats_ = 0;           // the loss op's scratch
  std::unique_ptr<EncoderTrainingRunner> runner_;
  std::unique_ptr<Buffer> emb_, d_emb_, workspace_, scores_, zeros_, scores_host_;
  // With Dense modules (enc_.dense_master): the step's pooled matrix [rows, H]
  // and its gradient, and each module's output and output gradient [rows,
  // out_i], the last module's being emb_ / d_emb_ [rows, W]. Without: empty,
  // the runner pools into emb_ ([rows, H]) directly.
  std::unique_ptr<Buffer> pooled_, d_pooled_;
  std::vector<std::unique_ptr<Buffer>> dense_out_, d_dense_out_;  // modules 0 .. n-2
  std::shared_ptr<Event> scores_copied_;
  std::vector<float> gather_host_;
  int64_t last_mini_batches_ = 0;
};

}  // namespace stoke::train
