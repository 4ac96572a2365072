// config.json of a Hugging Face encoder of one of the architectures in
// io/architectures.cc (BERT, RoBERTa, XLM-R, ...).
//
// Fields are read under the names the architecture's description gives
// (DistilBERT says "dim" where BERT says "hidden_size"); absent fields take
// the defaults of the matching transformers config class. Everything stoke's
// encoder does not run is refused by name (other model types, activations
// other than erf GELU, relative position embeddings, decoders). Every error
// names the file and the field:
//   config.json: field "hidden_size": expected a positive integer, found -3
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/architecture.h"

namespace stoke {

enum class ProblemType { unspecified, single_label_classification, multi_label_classification, regression };

// "bert", "roberta", "xlm-roberta", ... (the config.json spelling).
std::string_view model_type_name(ModelType t);
// "single_label_classification", ...; "" for unspecified.
std::string_view problem_type_name(ProblemType p);

struct HfConfig {
  ModelType model_type = ModelType::bert;
  const Architecture* arch = &architecture_of(ModelType::bert);  // never null
  std::string model_type_name;      // as written in config.json
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t embedding_size = 0;       // = hidden_size unless the architecture projects (ELECTRA)
  int64_t relative_attention_num_buckets = 0;  // MPNet's relative-position buckets; 0: none
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;
  int64_t type_vocab_size = 0;     // 0: the architecture has no token types
  double layer_norm_eps = 0;
  int64_t pad_token_id = 0;
  std::string hidden_act;           // "gelu" or "gelu_python": both are the erf form
  double hidden_dropout = 0;        // training: embeddings, attention output, FFN output
  double attention_dropout = 0;     // training: attention probabilities
  double classifier_dropout = 0;    // training: the classification head
  ProblemType problem_type = ProblemType::unspecified;
  std::vector<std::string> id2label;          // index = id; size = num_labels
  std::map<std::string, int64_t> label2id;    // every value in [0, num_labels)
  std::vector<std::string> architectures;     // e.g. "BertForSequenceClassification"
  std::string position_embedding_type;        // always "absolute" (others are refused)
  // Decoders (LayerFamily::decoder: Qwen2, Qwen3); 0 / false / empty for encoders.
  // pad_token_id is -1 there when config.json has none (null).
  int64_t num_key_value_heads = 0;  // k/v heads of grouped-query attention (divides num_attention_heads)
  int64_t attention_head_dim = 0;   // "head_dim": Qwen3's need not be hidden_size / num_attention_heads
  double rope_theta = 0;            // the rotary base: "rope_parameters"."rope_theta" (transformers 5) or "rope_theta"
  bool attention_bias = false;      // q/k/v projections have biases (Qwen2 always; Qwen3 also o, when true)
  bool causal = true;               // false with "is_causal": false (bidirectional, as gte-Qwen2 runs)
  bool tie_word_embeddings = false; // read, not used: embeddings and classifiers never use the LM head
  std::string remote_code;          // "auto_map"'s AutoModel entry: named, never run; "" when absent
  // Rotary encoders (arch->positions == PositionScheme::rotary: GTE, NomicBERT);
  // rope_theta above is their base too. rotary_dim: the rotated columns of
  // each head (= head_dim unless partial); hidden_act names the GLU's activation.
  int64_t rotary_dim = 0;
  bool rotary_interleaved = false;  // pairs (2i, 2i + 1) instead of NeoX rotate-half
  // ModernBERT (LayerFamily::prenorm_encoder); empty / 0 elsewhere. rope_theta above is the
  // global layers' base.
  std::vector<int> attention_window;  // per layer: 0 = global attention, w = local (|i - j| <= w = local_attention / 2)
  double local_rope_theta = 0;        // the local layers' rotary base
  bool classifier_mean_pooling = false;  // classifier_pooling "mean" (else "cls": the first token)

  int64_t num_labels() const { return static_cast<int64_t>(id2label.size()); }
  // Positions a sequence (special tokens included) may use. BERT:
  // max_position_embeddings. RoBERTa / XLM-R number positions from
  // pad_token_id + 1, so: max_position_embeddings - pad_token_id - 1
  // (the architecture's PositionScheme decides).
  int64_t usable_positions() const;
  int64_t head_dim() const { return attention_head_dim > 0 ? attention_head_dim : hidden_size / num_attention_heads; }
  // The prefix of encoder/pooler names in *For...Classification checkpoints: "bert." / "roberta." / ...
  std::string_view checkpoint_prefix() const;
};

// Parses and validates config.json text; `label` names the file in errors.
// Throws Error: format (malformed / contradictory), unsupported (a model type,
// activation or feature stoke does not run), not_found (model_type absent).
HfConfig parse_hf_config(std::string_view json, const std::string& label);

// Reads <folder>/config.json. No such file -> ModelFolderError(no_config).
HfConfig load_hf_config(const std::filesystem::path& folder);

}  // namespace stoke
