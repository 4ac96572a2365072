// The sequence classifier as a training task (train/train_task.h):
// labelled examples, length-grouped batches, the classification head's loss
// (cross-entropy, or MSE for a one-output regression head), and evaluation
// by loss, accuracy and macro F1.
#pragma once

#include <memory>
#include <vector>

#include "train/train_data.h"
#include "train/train_task.h"

namespace stoke::train {

struct ClassifierTaskOptions {
  int64_t batch_size = 8;  // per rank: the micro-batch a halving splits
  bool shuffle = true, group_by_length = true;
  uint64_t seed = 42;
  DropoutRates dropout;
  float label_smoothing = 0;
  bool regression = false;
  bool graphs = true;  // CUDA graphs per length bucket (one process only: a rank's backward feeds the all-reduce)
  bool graph_shapes_without_capture = false;  // tests: the graphed form, eagerly
};

class ClassifierTask final : public TrainTask {
 public:
  ClassifierTask(TrainableEncoder& encoder, Backend& backend, const ClassifierTaskOptions& options,
                 const std::vector<Example>& train, const std::vector<Example>* eval);
  size_t examples() const override { return train_.size(); }
  uint64_t tokens_of(uint32_t i) const override { return static_cast<uint64_t>(lengths_[i]); }
  std::vector<std::vector<uint32_t>> epoch_batches(int64_t batch, int64_t epoch) const override;
  void make_workspace(int halvings) override;
  void release_workspace() override { runner_.reset(); }
  bool can_halve(int halvings, std::string* why) const override;
  int64_t piece(int halvings) const override;
  void enqueue(const std::vector<uint32_t>& global, const MicroBatchPlace& place, const TensorView& metrics) override;
  std::optional<EvalMetrics> evaluate() override;
  EncoderTrainingRunner::GraphStats graph_stats() const override;
  bool reports_accuracy() const override { return !o_.regression; }

 private:
  TrainableEncoder& enc_;
  Backend& backend_;
  ClassifierTaskOptions o_;
  const std::vector<Example>& train_;
  const std::vector<Example>* eval_;
  std::vector<int64_t> lengths_;
  int64_t chunk_ = 0;  // examples per chunk of a micro-batch (the workspace's)
  std::unique_ptr<EncoderTrainingRunner> runner_;
};

}  // namespace stoke::train
