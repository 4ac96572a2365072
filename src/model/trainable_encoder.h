// An encoder being fine-tuned: f32 master parameters and their gradients in
// two flat device buffers with one ParamLayout, plus compute-dtype copies of
// the layers' GEMM weights when training in bf16 / f16 (refreshed from the
// masters after every optimizer step). The forward reads `compute`, the
// backward accumulates into `grad`, the optimizer updates `master`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/hf_config.h"
#include "io/model_weights.h"
#include "model/encoder_params.h"
#include "model/param_layout.h"

namespace stoke {

struct TrainableInit {
  uint64_t seed = 42;               // the run's seed: new heads are drawn from it
  double initializer_range = 0.02;  // config.json "initializer_range" (transformers' default 0.02)
  ParamHeads heads = ParamHeads::classifier;  // none: an embedding model (no head, no pooler)
  // An embedding model's sentence-transformers Dense modules (heads none),
  // trained with the encoder; their initial values are read from
  // dense_folder / <module path> / model.safetensors.
  std::vector<DenseModule> dense;
  std::filesystem::path dense_folder;
};

struct TrainableEncoder {
  HfConfig config;                  // the model being trained (num_labels / id2label as trained)
  DType dtype = DType::f32;         // compute dtype of the layers' GEMMs
  ParamLayout layout;
  std::unique_ptr<Buffer> master_buffer, grad_buffer, low_buffer;
  // Fixed tensors, not parameters: rotary encoders' inv_freq and zero
  // position row; the layer family's (ModernBERT: zeros and its two inv_freqs).
  std::unique_ptr<Buffer> fixed_buffer;
  std::vector<std::unique_ptr<Buffer>> family_fixed;
  EncoderParams master;             // f32 views into master_buffer
  EncoderParams grad;               // f32 views into grad_buffer, same layout
  EncoderParams compute;            // what the forward reads: GEMM weights in dtype, the rest = master
  // The Dense modules after pooling (f32 always, forward and backward):
  // views into master_buffer / grad_buffer; empty without Dense modules.
  std::vector<DenseLayerParams> dense_master, dense_grad;

  explicit TrainableEncoder(const HfConfig& c, ParamHeads heads = ParamHeads::classifier,
                            const std::vector<DenseModule>& dense = {})
      : config(c), layout(c, heads, dense) {}
  // The width of a sentence embedding: the last Dense module's out_features, else H.
  int64_t sentence_width() const { return dense_master.empty() ? config.hidden_size : dense_master.back().w.dim(0); }
  float* master_data() const { return static_cast<float*>(master_buffer->data()); }
  float* grad_data() const { return static_cast<float*>(grad_buffer->data()); }
  TensorView master_flat() const;
  TensorView grad_flat() const;
  // Enqueues the conversion of the master GEMM weights into the compute
  // copies (bf16 / f16); nothing for f32, where compute is master.
  void refresh_compute_weights(const Ops& ops) const;
  // The encoder as the inference runner takes it (for evaluation): compute
  // views, no ownership.
  LoadedEncoder inference_view() const;
};

// Decoders (LayerFamily::decoder) run inference only: the one refusal, for
// every place that would train one.
[[noreturn]] void refuse_decoder_training(const Architecture& arch);

// What load_trainable_encoder did that the user should hear about.
struct TrainableLoadReport {
  std::vector<std::string> initialised;  // parameter names drawn fresh (absent, or a head of another size)
};

// Fills the master parameters from `weights`, which must match `stored_config`
// (the checkpoint's own config.json); `config` is the model to train, equal to
// stored_config except perhaps in its labels. Tensors the checkpoint lacks
// (a bare encoder's classifier, a missing pooler) or whose shape the new label
// count changes are initialised as transformers' _init_weights does (Linear
// weights ~ N(0, initializer_range), biases 0), from a Philox stream keyed by
// the seed and the parameter's index, so a run is reproducible. Synchronizes
// once at the end of loading (counted).
std::unique_ptr<TrainableEncoder> load_trainable_encoder(const HfConfig& config, const HfConfig& stored_config,
                                                         const ModelWeights& weights, Backend& backend, DType dtype,
                                                         const TrainableInit& init, TrainableLoadReport* report);

}  // namespace stoke
