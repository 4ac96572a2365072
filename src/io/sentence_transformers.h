// The sentence-transformers layout of a model folder: modules.json,
// <pooling>/config.json, sentence_bert_config.json, config_sentence_transformers.json.
//
// Modules are read by TYPE (the last component of "type"), not by folder: a
// Normalize entry means normalize although no 2_Normalize folder exists.
// stoke runs Transformer -> Pooling (one mode) -> Dense (any number, Tanh or
// Identity) -> optional Normalize; any other module (LayerNorm,
// WordEmbeddings, CNN, LSTM, ...) is refused by name.
//
// A SPLADE sparse encoder (sentence-transformers' SparseEncoder) is the other
// chain stoke runs: MLMTransformer (or Transformer with sentence_bert_config's
// "transformer_task": "fill-mask") -> SpladePooling, nothing after it
// (model/splade_head.h computes it); or a Router (router_config.json) whose
// "document" route is that chain and whose "query" route is one
// SparseStaticEmbedding (inference-free SPLADE).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/pooling.h"

namespace stoke {

// A sentence_transformers Dense module: y = act(x W^T + b), applied to the
// pooled vector. Its weights are <path>/model.safetensors ("linear.weight"
// [out, in], "linear.bias" [out]).
struct DenseModule {
  enum class Activation { identity, tanh };
  std::string path;            // the module folder, relative to the model folder
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = true;
  Activation activation = Activation::tanh;
};

// sentence_transformers' SpladePooling (sparse_encoder/modules/splade_pooling.py,
// 6.2.0): its config.json keys pooling_strategy ("max" | "sum", default max),
// activation_function ("relu" | "log1p_relu", default relu),
// embedding_dimension (5.x: word_embedding_dimension; null or the vocabulary
// size) and chunk_size (memory only; read and ignored: stoke pools in blocks
// of its own).
struct SpladeModule {
  enum class Strategy { max, sum };
  std::string path;                       // the module folder
  Strategy strategy = Strategy::max;
  int log1p_count = 1;                    // relu: log1p(relu(x)); log1p_relu: log1p(log1p(relu(x)))
  std::optional<int64_t> embedding_dimension;
  // Inference-free SPLADE (a Router: query -> SparseStaticEmbedding, document ->
  // MLMTransformer -> SpladePooling): the query route's folder, relative to
  // the model folder; "" when every text runs the encoder.
  std::string static_query_path;
};
std::string_view splade_strategy_name(SpladeModule::Strategy s);       // "max", "sum"
std::string_view splade_activation_name(const SpladeModule& m);        // "relu", "log1p_relu"

struct SentenceTransformersConfig {
  bool present = false;                          // modules.json exists
  std::optional<Pooling> pooling;                // absent when there is no Pooling module
  bool normalize = false;                        // a Normalize module follows pooling
  std::optional<int64_t> max_seq_length;         // sentence_bert_config.json
  std::optional<bool> do_lower_case;             // sentence_bert_config.json
  std::optional<int64_t> word_embedding_dimension;  // <pooling>/config.json
  bool include_prompt = true;                    // <pooling>/config.json
  std::map<std::string, std::string> prompts;    // config_sentence_transformers.json
  std::optional<std::string> default_prompt_name;
  std::vector<std::string> module_types;         // e.g. {"Transformer", "Pooling", "Normalize"}
  std::vector<DenseModule> dense;                // after pooling, before Normalize, in order
  // The Transformer module's folder relative to the model folder: "" for the
  // root (today's layout), "0_Transformer" / "0_BERT" in older saves. config.json,
  // the weights and the tokenizer files live there.
  std::string transformer_path;
  // SPLADE: the Transformer gives MLM logits (MLMTransformer, or transformer_task
  // "fill-mask") and SpladePooling pools them; absent otherwise.
  bool masked_lm = false;
  std::optional<SpladeModule> splade;
  // A PyLate ColBERT model (config_sentence_transformers.json's "model_type":
  // "ColBERT", or a pylate.models.Dense.Dense module): Transformer -> Dense
  // modules on EVERY token, no Pooling, no Normalize (model/colbert_model.h).
  // `dense` then holds those per-token modules (PyLate's Dense: no
  // use_residual; Identity or Tanh).
  bool colbert = false;
};

// No modules.json -> present = false (a plain HF folder; not an error).
// Throws Error: unsupported (a module type or pooling stoke does not run,
// several pooling modes at once), refused (a module path that is absolute,
// has "..", or leaves the folder), format (malformed files), not_found (a
// Pooling module without its config.json, a Transformer path without config.json).
SentenceTransformersConfig load_sentence_transformers(const std::filesystem::path& folder);

}  // namespace stoke
