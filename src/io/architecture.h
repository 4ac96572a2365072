// An encoder architecture as a description: everything that differs between
// BERT, RoBERTa, XLM-R, CamemBERT, ELECTRA, DistilBERT, MPNet is a field here,
// and the loader (io/hf_config, io/encoder_layout), the inference encoder,
// the trainable layout and the trainer read these fields instead of asking
// "which model is this?". The layers come from the entry's LayerFamily (one
// unit per family); within a family what varies is names, embeddings, heads,
// rotary, gating and MPNet's relative-position bias.
//
// One table (io/architectures.cc) holds one entry per config.json model_type.
// It lives in io/ rather than model/ because the loader needs the tensor names
// and config field names, and io/ sits below model/ in the layer list.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace stoke {

enum class ModelType { bert, roberta, xlm_roberta, camembert, electra, distilbert, mpnet, qwen2, qwen3, gte_hub, gte, nomic_bert,
                       modernbert };

// The layer families: one unit each (its inference forward and training
// forward side by side, its backward, its buffers and parameter placement).
// A new variant of a family is a table entry; a new family is a new unit.
enum class LayerFamily {
  // BERT, RoBERTa, XLM-R, CamemBERT, ELECTRA, DistilBERT, MPNet, GTE,
  // NomicBERT: LN(x + attention(x)), LN(h + FFN(h)); variants differ in
  // embeddings, rotary (GTE, NomicBERT), a gated FFN (gated_ffn) and MPNet's
  // relative-position bias. model/post_ln_family.h (both forms, the
  // backward, the training workspace).
  post_ln_encoder,
  // ModernBERT: pre-norm layers (a LayerNorm without bias before attention
  // and before the feed-forward, none before layer 0's attention), q/k/v in
  // one stored matrix, rotary positions (no position or token type table),
  // a GeGLU feed-forward, global and sliding-window local layers with their
  // own rope theta, a final LayerNorm, no linear biases; the head pools
  // (classifier_pooling), then dense, GELU, LayerNorm, classifier.
  // model/prenorm_family.h.
  prenorm_encoder,
  // Qwen2, Qwen3: pre-norm layers with RMSNorm, rotary positions (no
  // position or token type table), grouped-query attention, causal unless
  // config.json says "is_causal": false, a SwiGLU feed-forward and a final
  // RMSNorm; its classifier (`score`, no bias) reads the last non-pad token.
  // Inference only. model/decoder_family.h.
  decoder,
};

// How a token's position index is computed (packed_batch).
enum class PositionScheme {
  from_zero,      // BERT: 0, 1, 2, ...
  after_padding,  // RoBERTa / XLM-R: pad_token_id + 1, + 2, ...; pad tokens get pad_token_id
  // Rotary encoders (GTE, NomicBERT): no position table. The rotary op numbers
  // tokens from cu_seqlens; every position is 0, the row of a one-row zero
  // table the embedding ops add (so they need no second form).
  rotary,
};

// The activation of the classification head's hidden layer.
enum class HeadActivation { tanh, gelu, relu };

// The tokenizer family a model folder of this architecture normally carries.
enum class TokenizerFamily { wordpiece, sentencepiece, bytelevel_bpe };

// Every parameter an encoder may have, by what it does. Layer roles repeat
// per layer; the others occur once.
enum class TensorRole {
  word_embeddings,        // (V, E)
  position_embeddings,    // (P, E)
  token_type_embeddings,  // (TV, E)   absent when the architecture has no token types
  embeddings_ln_weight,   // (E)
  embeddings_ln_bias,     // (E)
  embeddings_project_weight,  // (H, E)  ELECTRA when embedding_size != hidden_size
  embeddings_project_bias,    // (H)
  relative_attention_bias,    // (NB, heads)  MPNet: a bias per relative-position bucket, shared by the layers
  query_weight, query_bias,   // (H, H), (H)
  key_weight, key_bias,
  value_weight, value_bias,
  attn_out_weight, attn_out_bias,  // (H, H), (H)
  attn_ln_weight, attn_ln_bias,    // (H)
  ffn_in_weight, ffn_in_bias,      // (I, H), (I)
  ffn_out_weight, ffn_out_bias,    // (H, I), (H)
  ffn_ln_weight, ffn_ln_bias,      // (H)
  pooler_weight, pooler_bias,      // (H, H), (H)  the base model's pooler
  head_dense_weight, head_dense_bias,  // (H, H), (H)  the classification head's own hidden layer
  head_out_weight, head_out_bias,      // (C, H), (C)
  // Decoders (Qwen2, Qwen3), after the encoder roles so those keep their order.
  // Their attention roles above are (heads * d, H) for q, (kv_heads * d, H)
  // for k and v, (H, heads * d) for the output; attn_ln / ffn_ln are the
  // pre-attention / pre-FFN RMSNorms (weights only); ffn_in is SwiGLU's up.
  q_norm_weight, k_norm_weight,        // (d) per layer: Qwen3's per-head RMSNorm of q and k
  ffn_gate_weight,                     // (I, H) per layer: SwiGLU's gate
  final_norm_weight,                   // (H) the RMSNorm after the last layer (ModernBERT: a LayerNorm)
  // Rotary + GLU encoders (GTE, NomicBERT), after the decoder roles.
  qkv_weight, qkv_bias,                // (3H, H), (3H) per layer: q, k, v stored fused (GTE's qkv_proj, Nomic's Wqkv, ModernBERT's Wqkv)
  ffn_up_gate_weight,                  // (2I, H) per layer: the GLU's two halves stored fused (GTE's up_gate_proj)
  head_norm_weight,                    // (H) ModernBERT's head: the LayerNorm after its dense and activation
  count
};
inline constexpr size_t kTensorRoles = static_cast<size_t>(TensorRole::count);

bool role_is_per_layer(TensorRole r);

// config.json field names of the numbers every encoder has (DistilBERT spells
// them differently). An empty name: the architecture has no such field and
// uses the fixed default.
struct ConfigFields {
  std::string_view hidden_size = "hidden_size";
  std::string_view num_hidden_layers = "num_hidden_layers";
  std::string_view num_attention_heads = "num_attention_heads";
  std::string_view intermediate_size = "intermediate_size";
  std::string_view hidden_act = "hidden_act";
  std::string_view layer_norm_eps = "layer_norm_eps";
  std::string_view type_vocab_size = "type_vocab_size";
  std::string_view embedding_size = "";       // ELECTRA: "embedding_size"
  std::string_view relative_attention_num_buckets = "";  // MPNet
  std::string_view hidden_dropout = "hidden_dropout_prob";
  std::string_view attention_dropout = "attention_probs_dropout_prob";
  std::string_view classifier_dropout = "classifier_dropout";  // null: hidden_dropout
  std::string_view attention_bias = "";  // Qwen3: q/k/v/o biases when true (Qwen2: q/k/v always, o never)
};

// The transformers defaults of one config class (v4.29 / v5 agree here).
struct ConfigDefaults {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  int64_t embedding_size = 0;  // 0: hidden_size
  int64_t relative_attention_num_buckets = 0;  // MPNet: 32
  double layer_norm_eps = 1e-12;
  int64_t pad_token_id = 0;
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  double classifier_dropout = -1;  // < 0: the hidden dropout (transformers' rule for a null classifier_dropout)
  double rope_theta = 10000.0;     // rotary architectures: the config class's default base
  std::string_view hidden_act = "gelu";
};

struct Architecture {
  ModelType type = ModelType::bert;
  std::string_view model_type;          // config.json "model_type"
  std::string_view display_name;        // "BERT"
  std::string_view checkpoint_prefix;   // "bert.": the base model's tensors in *ForSequenceClassification
  std::string_view sequence_classifier; // "BertForSequenceClassification" (config.json "architectures")
  PositionScheme positions = PositionScheme::from_zero;
  bool token_types = true;              // a token type embedding table exists
  bool embedding_projection = false;    // embedding_size may differ from hidden_size (ELECTRA)
  // Classification head: hidden = act(dense(h[first token])), logits = out(hidden).
  // head_on_pooler: the dense is the base model's pooler (BERT), saved with
  // the prefix; otherwise it is the head's own (classifier.dense, pre_classifier).
  bool head_on_pooler = false;
  HeadActivation head_activation = HeadActivation::tanh;
  // The head's own dropout sites: before the dense (RoBERTa, ELECTRA) and
  // after the activation (all).
  bool head_dropout_before_dense = false;
  TokenizerFamily tokenizer = TokenizerFamily::wordpiece;
  ConfigFields fields;
  ConfigDefaults defaults;
  // The layer family: which unit computes the layers (its forward in both
  // forms, its backward, buffers and head). Everything else in the entry is a
  // variant's detail the family reads. Code outside the family's unit and the
  // config readers asks `family`, never the family's own booleans.
  LayerFamily family = LayerFamily::post_ln_encoder;
  // A gated feed-forward stored as two halves (or one ffn_up_gate_weight):
  // the loader stacks them into one (2I, H) matrix, so the FFN is one GEMM
  // into both GLU halves side by side. glu_act_on_second: the halves are
  // [up | gate] (GTE's up_gate_proj, Nomic's fc11 | fc12); false: [gate | up]
  // (Qwen's gate_proj, up_proj). In the post-LN family (GTE, NomicBERT;
  // positions = PositionScheme::rotary: the layer sequence rotates q and k
  // after the QKV GEMM) the sequence then runs glu (model/post_ln_family.h);
  // the decoder family always does (SwiGLU, model/decoder_family.h).
  // ModernBERT's Wi holds both halves already: false there.
  // glu_inner_dropout (post-LN): hidden dropout on act(gate) * up before the
  // down projection (GteMLP's dropout).
  bool gated_ffn = false;
  bool glu_act_on_second = true;
  bool glu_inner_dropout = false;
  // Tensor names without the checkpoint prefix; "{}" stands for the layer
  // index. Empty: the architecture has no such tensor.
  std::array<std::string_view, kTensorRoles> names{};

  std::string_view name_of(TensorRole r) const { return names[static_cast<size_t>(r)]; }
  bool has(TensorRole r) const { return !name_of(r).empty(); }
  // The classification head has a hidden layer (the pooler, or the head's
  // own dense) before its output layer; a decoder's `score` has none.
  bool head_has_dense() const { return head_on_pooler || has(TensorRole::head_dense_weight); }
  // The name of role r in layer `layer` (ignored for non-layer roles).
  std::string tensor_name(TensorRole r, int64_t layer) const;
};

// The architecture with this config.json model_type; nullptr when stoke does not run it.
const Architecture* find_architecture(std::string_view model_type);
const Architecture& architecture_of(ModelType t);
// "bert, roberta, ...": the model types stoke runs, for error messages.
std::string supported_model_types();

std::string_view head_activation_name(HeadActivation a);
std::string_view tokenizer_family_name(TokenizerFamily f);

}  // namespace stoke
