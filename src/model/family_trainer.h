// What a layer family's training unit is handed and what it implements
// (model/post_ln_family.h, model/prenorm_family.h). EncoderTrainingRunner
// owns the inputs, their staging, the graphs and the order of the phases; the
// family owns its workspace (every activation its backward reads) and the
// math of each phase:
//   forward        the encoder forward, keeping what the backward reads
//   loss           the classification head's forward and the loss (metrics
//                  added to a device buffer, d logits kept)
//   backward_head  the head's backward, down to d last hidden state
//   backward       the encoder's backward from there (parameter gradients ADD)
// An embedding model skips the head: the runner pools last_hidden() and
// writes d_last_hidden() from the pooling's backward.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "backend/backend.h"

namespace stoke {

struct DropoutRates {
  float hidden = 0.0f;      // hidden_dropout_prob: embeddings, attention output, FFN output
  float attention = 0.0f;   // attention_probs_dropout_prob
  float classifier = 0.0f;  // classifier_dropout, else hidden_dropout_prob (transformers' rule)
};

struct MicroBatchKnobs {
  DropoutRates dropout;
  uint64_t seed = 0;        // dropout masks: Philox key
  uint32_t step = 0;        // micro-step number (each draws its own masks)
  // Where this micro-batch starts in the whole micro-batch its masks belong
  // to: the tokens and the sequences before it. A data-parallel rank trains a
  // slice of the global micro-batch and passes its slice's offsets, so it
  // draws exactly the masks one process draws for those examples; 0 for a
  // whole batch.
  uint64_t token_offset = 0, sequence_offset = 0;
  float label_smoothing = 0.0f;
  float loss_scale = 1.0f;  // the loss's weight in the gradient: 1 / examples of the optimizer step
  // f16 training: the dynamic loss scaler's device state (Ops::LossScaler);
  // the loss gradient is multiplied by its scale on the device before the
  // backward (op loss_scale_multiply). Empty: no loss scaling.
  TensorView loss_scaler{};
  bool regression = false;  // one output trained with MSE on `targets` (else cross-entropy on `labels`)
};

// Dropout sites (Philox tensor ids): 0 the embeddings, 1 + 3l / 2 + 3l / 3 + 3l
// layer l's attention probabilities / attention output / FFN output, then the
// classification head's: kHeadSite (BERT: the pooled output; RoBERTa-style
// heads: the first token) and kHeadSite + 1 (RoBERTa-style heads: after the
// head's dense + activation).
inline constexpr uint32_t kHeadSite = 1u << 20;

// One micro-batch's device views and settings, shared by its phases.
// Graph-shaped: T, cu and maxlen are the bucket's (padding included), B
// and cu_head the real sequences'; else cu_head is cu.
struct TrainStep {
  const MicroBatchKnobs& knobs;
  int64_t T = 0, B = 0;
  int maxlen = 0;
  TensorView ids{}, types{}, positions{}, cu{}, rows{}, labels{}, targets{};  // types empty: no token types
  TensorView cu_head{};      // B + 1 offsets for the head's pool_backward (the last one = T)
  int64_t tokens = 0;        // the batch's own tokens (T less the padding)
  TensorView cu_real{};      // B + 1 offsets, the batch's own (the last one = tokens): the head's pooling
  Ops::DropoutStep layer_step{};  // the layers' dropout step: knobs.step, or the device copy of it
  float eps = 0;
  int heads = 0;
  bool low = false;                 // GEMMs in bf16 / f16
  Activation act = Activation::tanh;  // the classification head's
  bool drop_before_dense = false;   // the head drops its input out (RoBERTa-style, when p > 0)
  uint32_t out_site = kHeadSite;    // the head's dropout site before the output layer
  Ops::AttentionDropout attn_drop(int64_t l) const;
};

// Device memory for one kept activation, sized for the largest micro-batch;
// views are cut per batch.
struct TrainSlab {
  std::unique_ptr<Buffer> buf;
  DType dtype = DType::f32;
  int64_t cols = 0;
  TensorView rows(int64_t n) const { return TensorView(buf->data(), dtype, {n, cols}); }
  TensorView vec(int64_t n) const { return TensorView(buf->data(), dtype, {n}); }
};
// rows x cols elements of t (at least one).
TrainSlab train_slab(Backend& backend, DType t, int64_t rows, int64_t cols);

class FamilyTrainer {
 public:
  virtual ~FamilyTrainer() = default;
  // What the family refuses in a micro-batch's knobs, before anything is enqueued.
  virtual void check(const MicroBatchKnobs& knobs) const { (void)knobs; }
  virtual void forward(const TrainStep& st) const = 0;
  virtual void loss(const TrainStep& st, const TensorView& metrics) const = 0;
  virtual void backward_head(const TrainStep& st) const = 0;
  // after_layer(l) after each layer's backward (from the last down); the
  // runner calls it once more with -1 after the whole backward.
  virtual void backward(const TrainStep& st, const std::function<void(int64_t)>& after_layer) const = 0;
  // (T, H) f32: the encoder's output (pre-norm: the final norm's) and its gradient.
  virtual TensorView last_hidden(int64_t T) const = 0;
  virtual TensorView d_last_hidden(int64_t T) const = 0;
};

}  // namespace stoke
