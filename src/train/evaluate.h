// Evaluation without gradients: every example through the inference forward
// (the compute weights of the model being trained, no dropout), the logits
// copied to host memory as each batch finishes, and ONE host wait at the end
// — an evaluation costs one host sync however many batches it has.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "model/encoder.h"
#include "model/packed_batch.h"
#include "train/train_data.h"

namespace stoke::train {

struct EvalMetrics {
  int64_t examples = 0;
  double loss = 0;      // mean cross-entropy (classification) or mean squared error (regression)
  double accuracy = 0;  // classification only
  double macro_f1 = 0;  // classification only: unweighted mean of per-class F1 over classes in labels or predictions
  bool regression = false;
  // Embedding models: the evaluator's metrics by their sentence-transformers
  // names ("cosine_ndcg@10", "spearman_cosine", ...; train/embedding_task.h);
  // empty for the classifier, whose fields above are what it has.
  std::vector<std::pair<std::string, double>> named;
  const double* find(const std::string& name) const {
    for (const auto& [n, v] : named)
      if (n == name) return &v;
    return nullptr;
  }
};

// Packs examples[indices] for the encoder (positions by the model's rule).
PackedBatch pack_examples(const std::vector<Example>& examples, const std::vector<uint32_t>& indices,
                          const HfConfig& config);

// `runner` must hold batches of `batch_size` examples of the longest length.
EvalMetrics evaluate(EncoderRunner& runner, Backend& backend, const HfConfig& config,
                     const std::vector<Example>& examples, int64_t batch_size, bool regression);

// The metrics from logits [n, C] and labels (exposed for tests).
EvalMetrics classification_metrics(const std::vector<float>& logits, int64_t classes, const std::vector<int32_t>& labels);

}  // namespace stoke::train
