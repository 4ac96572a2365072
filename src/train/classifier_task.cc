#include "train/classifier_task.h"

#include <algorithm>

#include "core/crash_point.h"
#include "core/error.h"
#include "train/batch_order.h"
#include "train/micro_batch_split.h"

namespace stoke::train {

ClassifierTask::ClassifierTask(TrainableEncoder& encoder, Backend& backend, const ClassifierTaskOptions& options,
                               const std::vector<Example>& train, const std::vector<Example>* eval)
    : enc_(encoder), backend_(backend), o_(options), train_(train), eval_(eval) {
  for (const Example& e : train_) lengths_.push_back(static_cast<int64_t>(e.ids.size()));
}

std::vector<std::vector<uint32_t>> ClassifierTask::epoch_batches(int64_t batch, int64_t epoch) const {
  return train::epoch_batches(lengths_, BatchOrderOptions{o_.shuffle, o_.group_by_length, batch, o_.seed}, epoch);
}

int64_t ClassifierTask::piece(int halvings) const { return chunk_examples(o_.batch_size, halvings); }

bool ClassifierTask::can_halve(int halvings, std::string* why) const {
  if (piece(halvings) > 1) return true;
  *why = "not even one training example fits the device: the longest, of " +
         std::to_string(workspace_tokens(lengths_, 1)) + " tokens, needs more than it has; try a shorter --max-length";
  return false;
}

void ClassifierTask::make_workspace(int halvings) {
  chunk_ = piece(halvings);
  runner_.reset();  // the old workspace goes back before a smaller one is asked for
  crash_point("train_workspace");
  runner_ = std::make_unique<EncoderTrainingRunner>(enc_, backend_, workspace_tokens(lengths_, chunk_), chunk_);
  runner_->set_graphs(o_.graphs);
  runner_->set_padding_without_capture(o_.graph_shapes_without_capture);
}

// Dropout masks are keyed by the example's place in the global micro-batch
// (its tokens and its row, MicroBatchKnobs' offsets): each rank draws, for
// its slice, and each chunk, for its part, the masks one process with the
// whole global batch draws (the same seed everywhere, the micro-batch's step).
void ClassifierTask::enqueue(const std::vector<uint32_t>& global, const MicroBatchPlace& place,
                             const TensorView& metrics) {
  std::vector<int32_t> labels;
  std::vector<float> targets;
  std::vector<uint32_t> idx;
  const size_t begin = std::min(global.size(), static_cast<size_t>(place.rank * place.batch_size));
  const size_t end = std::min(global.size(), begin + static_cast<size_t>(place.batch_size));
  uint64_t tokens_before = 0;  // of the global micro-batch, before the chunk
  for (size_t j = 0; j < begin; ++j) tokens_before += static_cast<uint64_t>(lengths_[global[j]]);
  for (size_t c = begin; c < end; c += static_cast<size_t>(chunk_)) {
    const size_t c_end = std::min(end, c + static_cast<size_t>(chunk_));
    idx.assign(global.begin() + static_cast<long>(c), global.begin() + static_cast<long>(c_end));
    MicroBatchKnobs k;
    k.dropout = o_.dropout;
    k.seed = o_.seed;
    // The chunk packs right after the examples before it (pack_examples
    // adds tokens in order, no padding): its tokens and rows start there.
    k.token_offset = tokens_before;
    k.sequence_offset = c;
    k.step = place.step;
    k.label_smoothing = o_.label_smoothing;
    k.loss_scale = 1.0f / static_cast<float>(place.examples);
    k.regression = o_.regression;
    k.loss_scaler = place.loss_scaler;  // f16: the loss gradient times the device-side scale
    crash_point("train_micro_batch");
    const PackedBatch batch = pack_examples(train_, idx, enc_.config);
    labels.clear();
    targets.clear();
    for (uint32_t i : idx) {
      labels.push_back(train_[i].label);
      targets.push_back(train_[i].target);
      tokens_before += static_cast<uint64_t>(lengths_[i]);
    }
    // The last chunk's backward hands each finished layer to the all-reduce.
    if (place.backward_hook && c_end == end) runner_->set_backward_hook(place.backward_hook);
    runner_->enqueue(batch, labels, targets, k, metrics);
    runner_->set_backward_hook(nullptr);
  }
}

std::optional<EvalMetrics> ClassifierTask::evaluate() {
  if (!eval_ || eval_->empty()) return std::nullopt;
  int64_t longest = 0;
  for (const Example& e : *eval_) longest = std::max<int64_t>(longest, static_cast<int64_t>(e.ids.size()));
  const LoadedEncoder view = enc_.inference_view();
  // Batches of the training chunk: a device that had no room for the
  // training micro-batch gets the same share for evaluation.
  const int64_t batch = chunk_ > 0 ? chunk_ : o_.batch_size;
  EncoderRunner runner(view, backend_, longest * batch, batch, 3);
  return train::evaluate(runner, backend_, enc_.config, *eval_, batch, o_.regression);
}

EncoderTrainingRunner::GraphStats ClassifierTask::graph_stats() const {
  return runner_ ? runner_->graph_stats() : EncoderTrainingRunner::GraphStats{};
}

}  // namespace stoke::train
