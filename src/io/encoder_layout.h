// The parameters an encoder and its heads must have, derived from config.json
// and the architecture's description (io/architecture.h), and their lookup in
// a folder's weights.
//
// Names are canonical, as in the bare base model's state_dict
// ("embeddings.word_embeddings.weight"). In *ForSequenceClassification
// checkpoints the encoder and pooler carry the architecture's prefix ("bert.",
// "roberta.", ...) and the classifier has none; bare-model and
// sentence-transformers checkpoints carry no prefix. Both are accepted; one
// folder uses one scheme throughout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/hf_config.h"
#include "io/model_weights.h"

namespace stoke {

struct ExpectedTensor {
  enum Part { encoder, pooler, classifier };
  std::string name;                 // canonical: no "bert."/"roberta." prefix
  TensorRole role = TensorRole::word_embeddings;
  int64_t layer = -1;               // for per-layer roles
  std::vector<int64_t> shape;       // from config.json
  Part part = encoder;
  std::vector<std::string> dims;    // the config field behind each dimension, e.g. {"vocab_size", "hidden_size"}
};

// Every parameter, in model order: embeddings, layers 0..L-1, pooler, classifier.
// BERT's classifier: classifier.weight [num_labels, hidden] and .bias.
// RoBERTa / XLM-R: classifier.dense.{weight,bias} [hidden, hidden] and
// classifier.out_proj.{weight,bias} [num_labels, hidden]. The architecture's
// description says which roles exist and what they are called.
std::vector<ExpectedTensor> expected_tensors(const HfConfig& config);

struct ResolvedTensor {
  ExpectedTensor expected;
  const StoredTensor* view = nullptr;  // nullptr when absent (only pooler/classifier parts may be)
  std::string stored_name;           // the name in the checkpoint ("bert.encoder..." or "encoder..."); "" when absent
};

// Looks every expected tensor up and checks it. Throws ModelFolderError:
//   missing_tensor     an encoder tensor is absent (or a pooler / classifier
//                      tensor when need_pooler / need_classifier)
//   shape_mismatch     a present tensor's shape differs from config.json; the
//                      message names the tensor, both shapes and the config
//                      field(s) (word_embeddings rows name vocab_size)
//   dtype_unsupported  a weight that is not a float tensor (F32, F16, BF16, F64)
// Extra tensors (embeddings.position_ids, ...) are ignored.
std::vector<ResolvedTensor> resolve_encoder_tensors(const HfConfig& config, const ModelWeights& weights,
                                                    bool need_pooler, bool need_classifier);

}  // namespace stoke
