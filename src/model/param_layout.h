// Where every trainable parameter lives in one flat f32 buffer, and its
// Hugging Face name. Training keeps parameters, gradients and both AdamW
// moments as four flat buffers with this one layout, so the optimizer is one
// op per step, the gradient norm one reduction, and a checkpoint one list of
// (name, shape, offset) slices.
//
// The order is the checkpoint's, except that each layer's query, key and value
// weights (then their biases) sit next to each other: together they are the
// stacked (3H, H) matrix the forward multiplies by in one GEMM.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/encoder_layout.h"
#include "io/hf_config.h"
#include "model/encoder_params.h"

namespace stoke {

struct ParamSlot {
  std::string canonical;        // "encoder.layer.0.attention.self.query.weight" (no model prefix)
  std::string name;             // as *ForSequenceClassification saves it: "bert.encoder..." / "classifier.weight"
  TensorRole role = TensorRole::word_embeddings;
  int64_t layer = -1;           // per-layer roles
  std::vector<int64_t> shape;
  int64_t offset = 0;           // in elements, into the flat buffer
  int64_t numel = 0;
  ExpectedTensor::Part part = ExpectedTensor::encoder;
  // Weight decay applies here unless --decay-all is off and this is a bias or
  // a LayerNorm weight (the HF Trainer's rule, get_decay_parameter_names).
  bool decay = true;
  // A sentence-transformers Dense module's tensor (role TensorRole::count):
  // the module's index in the layout's dense list, else -1. Its name is
  // "<module path>/linear.weight" or ".../linear.bias"; the module folder's
  // model.safetensors holds it, not the encoder's.
  int64_t dense = -1;
};

// What is trained besides the encoder: a sequence classifier's head, or
// nothing (an embedding model: the loss reads the pooled last hidden state;
// sentence-transformers' AutoModel has a pooler the loss never reaches).
enum class ParamHeads { classifier, none };

class ParamLayout {
 public:
  // The encoder and the classification head (C = config.num_labels()); the
  // base model's pooler only where the head is built on it (BERT): the other
  // sequence classifiers have none. ParamHeads::none: the encoder alone.
  // dense (ParamHeads::none only): the sentence-transformers Dense modules
  // after pooling, in order; their weights and biases follow the encoder's.
  explicit ParamLayout(const HfConfig& config, ParamHeads heads = ParamHeads::classifier,
                       const std::vector<DenseModule>& dense = {});
  ParamHeads heads() const { return heads_; }
  const std::vector<DenseModule>& dense() const { return dense_; }

  const std::vector<ParamSlot>& slots() const { return slots_; }
  int64_t numel() const { return numel_; }
  const ParamSlot& slot(const std::string& canonical) const;  // throws Error(internal) when absent
  const ParamSlot* find(TensorRole role, int64_t layer = -1) const;  // nullptr when absent

  // Views of every parameter (f32) in a buffer with this layout.
  EncoderParams views(float* base) const;
  // Views of the Dense modules' parameters (f32) in such a buffer, in order.
  std::vector<DenseLayerParams> dense_views(float* base) const;
  // Sorted, merged [begin, end) element ranges where weight decay applies:
  // the decay flags (decay_all: the whole buffer).
  std::vector<int64_t> decay_ranges(bool decay_all) const;  // flattened pairs
  // A short fingerprint of names, shapes and offsets (checkpoints record it,
  // so optimizer state is never loaded into another layout).
  std::string fingerprint() const;

 private:
  HfConfig config_;
  ParamHeads heads_ = ParamHeads::classifier;
  std::vector<DenseModule> dense_;
  std::vector<ParamSlot> slots_;
  int64_t numel_ = 0;
};

}  // namespace stoke
