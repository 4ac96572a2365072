// What one kind of training gives the training loop (train/trainer.h): its
// examples and their batches, the device workspace and how it splits when
// memory runs out, each micro-batch's forward / loss / backward, and its
// evaluation. The loop — optimizer steps, logging, checkpoints, exact resume,
// data parallelism, stops — is one, whatever is trained: a sequence
// classifier (train/classifier_task.h) or an embedding model
// (train/embedding_task.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/encoder_training.h"
#include "train/evaluate.h"

namespace stoke::train {

// Where a rank's share of one global micro-batch sits, and how it is weighed.
struct MicroBatchPlace {
  uint32_t step = 0;          // the micro-step number: dropout masks are keyed by it
  int rank = 0, ranks = 1;
  int64_t batch_size = 0;     // per rank: rank r takes examples [r b, (r + 1) b) of the global micro-batch
  int64_t examples = 0;       // examples of the optimizer step over every rank and micro-batch
  int64_t micro_batches = 1;  // global micro-batches of the optimizer step (accumulated)
  TensorView loss_scaler{};   // f16: the device-side loss scale (empty: none)
  // Data parallelism: the step's last micro-batch hands each finished layer
  // to the gradient all-reduce through this (empty otherwise).
  std::function<void(int64_t layer)> backward_hook;
};

class TrainTask {
 public:
  virtual ~TrainTask() = default;
  virtual size_t examples() const = 0;
  virtual uint64_t tokens_of(uint32_t example) const = 0;  // every text of the example
  // An epoch's global micro-batches of `batch` examples: a pure function of
  // the epoch, so a resumed run visits the same.
  virtual std::vector<std::vector<uint32_t>> epoch_batches(int64_t batch, int64_t epoch) const = 0;
  // The device workspace for micro-batches split `halvings` times (RELIABILITY
  // 10: each halving halves what is in memory at once and changes nothing
  // else). Throws OutOfMemoryError when it does not fit.
  virtual void make_workspace(int halvings) = 0;
  virtual void release_workspace() = 0;
  // False when `halvings` is the smallest split there is; `why` then says
  // what did not fit and what to try.
  virtual bool can_halve(int halvings, std::string* why) const = 0;
  // What one piece holds at `halvings` (the run record's micro_batch_examples
  // / mini_batch_tokens).
  virtual int64_t piece(int halvings) const = 0;
  // Forward, loss (its sums added to the f64 [3] `metrics`: loss x examples,
  // correct, examples) and backward of this rank's share of `global`; the
  // parameter gradients ADD to the encoder's.
  virtual void enqueue(const std::vector<uint32_t>& global, const MicroBatchPlace& place,
                       const TensorView& metrics) = 0;
  // An evaluation with the weights as they are (nullopt: no evaluation set).
  virtual std::optional<EvalMetrics> evaluate() = 0;
  virtual EncoderTrainingRunner::GraphStats graph_stats() const = 0;
  // Whether metrics[1] / metrics[2] means something to log ("accuracy").
  virtual bool reports_accuracy() const = 0;
};

}  // namespace stoke::train
