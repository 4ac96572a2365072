// `stoke train --objective mnrl | mnrl-symmetric | cosent | cosine-mse`:
// what training an embedding model needs from the job beyond what the
// classifier shares with it — its data (named text columns, an evaluation
// set), the loss settings, and an output folder sentence-transformers loads
// as it is (modules.json, the Pooling and Normalize modules, the encoder's
// weights under AutoModel's names, a model card).
#pragma once

#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "io/model_weights.h"
#include "jobs/model_tokenizer.h"
#include "jobs/train_job.h"
#include "train/contrastive_data.h"
#include "train/embedding_task.h"

namespace stoke {

struct EmbeddingTrainingData {
  train::ContrastiveDataset train;
  std::vector<train::Example> texts;  // train.texts tokenized
  std::optional<train::EvalSet> eval;
  std::vector<train::Example> eval_texts;
  train::TokenizeStats stats;
  Pooling pooling = Pooling::mean;  // the base's Pooling module (mean without one)
  std::string pooling_name = "mean";
  bool normalize = false;                   // the base ends in a Normalize module
};

// Refuses what an embedding objective cannot train (Dense modules, a
// classifier-only flag, --batch-size auto, Matryoshka dims of another size),
// reads --train and --eval, tokenizes every distinct text once.
EmbeddingTrainingData read_embedding_training_data(const TrainOptions& o, const ModelTokenizer& mt,
                                                   TrainSummary& sum);

// The task's settings from the flags and the data.
train::EmbeddingTaskOptions embedding_task_options(const TrainOptions& o, const EmbeddingTrainingData& d,
                                                   int64_t batch, const DropoutRates& dropout,
                                                   dist::Communicator* comm, int64_t mini_batch_tokens);

// What a --resume must find unchanged besides the classifier's settings.
nlohmann::json embedding_identity(const TrainOptions& o, const EmbeddingTrainingData& d);

// The sentence-transformers files of the output (and of every checkpoint),
// config.json naming the bare encoder class, the pooler kept as the base had
// it, and the model card.
void add_embedding_model_files(train::SaveContext& save, const TrainOptions& o, const ModelTokenizer& mt,
                               const EmbeddingTrainingData& d, const ModelWeights& base,
                               const nlohmann::json& config_raw);

// --mini-batch-tokens unset: the whole batch when its workspace fits 80% of
// the device's free memory (or --memory-budget), else the largest number of
// tokens that does; `note` says which.
// An explicit one below the longest text is refused.
int64_t planned_mini_batch_tokens(const TrainOptions& o, const HfConfig& config, DType dtype, Backend& backend,
                                  const EmbeddingTrainingData& d, int64_t batch, std::string* note);

}  // namespace stoke
