// The table of architectures stoke runs: one entry per config.json
// model_type. Adding an encoder that fits the shared layer sequence is one
// entry here (plus, when it needs one, a new op).
#include <vector>

#include "io/architecture.h"

namespace stoke {

namespace {

using R = TensorRole;

void set(Architecture& a, R r, std::string_view name) { a.names[static_cast<size_t>(r)] = name; }

// Who an entry is: its type, config.json spelling, name for people, checkpoint
// prefix and transformers' sequence-classification class.
Architecture named(ModelType type, std::string_view model_type, std::string_view display, std::string_view prefix,
                   std::string_view classifier) {
  Architecture a;
  a.type = type;
  a.model_type = model_type;
  a.display_name = display;
  a.checkpoint_prefix = prefix;
  a.sequence_classifier = classifier;
  return a;
}

// The embeddings' names every encoder here shares (BERT's).
void embedding_names(Architecture& a) {
  set(a, R::word_embeddings, "embeddings.word_embeddings.weight");
  set(a, R::position_embeddings, "embeddings.position_embeddings.weight");
  set(a, R::embeddings_ln_weight, "embeddings.LayerNorm.weight");
  set(a, R::embeddings_ln_bias, "embeddings.LayerNorm.bias");
}

// BERT's feed-forward names (also MPNet's).
void bert_ffn_names(Architecture& a) {
  set(a, R::ffn_in_weight, "encoder.layer.{}.intermediate.dense.weight");
  set(a, R::ffn_in_bias, "encoder.layer.{}.intermediate.dense.bias");
  set(a, R::ffn_out_weight, "encoder.layer.{}.output.dense.weight");
  set(a, R::ffn_out_bias, "encoder.layer.{}.output.dense.bias");
  set(a, R::ffn_ln_weight, "encoder.layer.{}.output.LayerNorm.weight");
  set(a, R::ffn_ln_bias, "encoder.layer.{}.output.LayerNorm.bias");
}

// BERT's names (also RoBERTa's, XLM-R's, CamemBERT's and ELECTRA's encoder).
void bert_encoder_names(Architecture& a) {
  embedding_names(a);
  set(a, R::token_type_embeddings, "embeddings.token_type_embeddings.weight");
  set(a, R::query_weight, "encoder.layer.{}.attention.self.query.weight");
  set(a, R::query_bias, "encoder.layer.{}.attention.self.query.bias");
  set(a, R::key_weight, "encoder.layer.{}.attention.self.key.weight");
  set(a, R::key_bias, "encoder.layer.{}.attention.self.key.bias");
  set(a, R::value_weight, "encoder.layer.{}.attention.self.value.weight");
  set(a, R::value_bias, "encoder.layer.{}.attention.self.value.bias");
  set(a, R::attn_out_weight, "encoder.layer.{}.attention.output.dense.weight");
  set(a, R::attn_out_bias, "encoder.layer.{}.attention.output.dense.bias");
  set(a, R::attn_ln_weight, "encoder.layer.{}.attention.output.LayerNorm.weight");
  set(a, R::attn_ln_bias, "encoder.layer.{}.attention.output.LayerNorm.bias");
  bert_ffn_names(a);
}

// RobertaClassificationHead and its copies: dropout, dense, act, dropout, out_proj.
void dense_out_proj_head(Architecture& a, HeadActivation act) {
  set(a, R::head_dense_weight, "classifier.dense.weight");
  set(a, R::head_dense_bias, "classifier.dense.bias");
  set(a, R::head_out_weight, "classifier.out_proj.weight");
  set(a, R::head_out_bias, "classifier.out_proj.bias");
  a.head_on_pooler = false;
  a.head_activation = act;
  a.head_dropout_before_dense = true;
}

Architecture bert() {
  Architecture a = named(ModelType::bert, "bert", "BERT", "bert.", "BertForSequenceClassification");
  bert_encoder_names(a);
  set(a, R::pooler_weight, "pooler.dense.weight");
  set(a, R::pooler_bias, "pooler.dense.bias");
  set(a, R::head_out_weight, "classifier.weight");
  set(a, R::head_out_bias, "classifier.bias");
  a.head_on_pooler = true;  // BertPooler: tanh(dense(h[CLS])), dropout, classifier
  a.head_activation = HeadActivation::tanh;
  return a;
}

// RoBERTa and the models built on it: BERT's encoder, positions numbered
// after the padding id, no pooler in the sequence classifier (bare models
// and sentence-transformers exports still carry one).
Architecture roberta_like(ModelType type, std::string_view model_type, std::string_view display,
                          std::string_view classifier, TokenizerFamily tok, int64_t vocab) {
  Architecture a = named(type, model_type, display, "roberta.", classifier);
  a.positions = PositionScheme::after_padding;
  a.tokenizer = tok;
  a.defaults.vocab_size = vocab;
  a.defaults.pad_token_id = 1;
  bert_encoder_names(a);
  set(a, R::pooler_weight, "pooler.dense.weight");
  set(a, R::pooler_bias, "pooler.dense.bias");
  dense_out_proj_head(a, HeadActivation::tanh);
  return a;
}

Architecture electra() {
  Architecture a =
      named(ModelType::electra, "electra", "ELECTRA", "electra.", "ElectraForSequenceClassification");
  a.embedding_projection = true;
  a.fields.embedding_size = "embedding_size";
  a.defaults.hidden_size = 256;
  a.defaults.num_attention_heads = 4;
  a.defaults.intermediate_size = 1024;
  a.defaults.embedding_size = 128;
  bert_encoder_names(a);
  set(a, R::embeddings_project_weight, "embeddings_project.weight");
  set(a, R::embeddings_project_bias, "embeddings_project.bias");
  // ElectraModel has no pooler; its head uses GELU where BERT's uses tanh.
  dense_out_proj_head(a, HeadActivation::gelu);
  return a;
}

Architecture distilbert() {
  Architecture a = named(ModelType::distilbert, "distilbert", "DistilBERT", "distilbert.",
                         "DistilBertForSequenceClassification");
  a.token_types = false;
  a.fields.hidden_size = "dim";
  a.fields.num_hidden_layers = "n_layers";
  a.fields.num_attention_heads = "n_heads";
  a.fields.intermediate_size = "hidden_dim";
  a.fields.hidden_act = "activation";
  a.fields.layer_norm_eps = "";   // fixed 1e-12 in modeling_distilbert
  a.fields.type_vocab_size = "";
  a.fields.hidden_dropout = "dropout";
  a.fields.attention_dropout = "attention_dropout";
  a.fields.classifier_dropout = "seq_classif_dropout";
  a.defaults.num_hidden_layers = 6;
  a.defaults.type_vocab_size = 0;
  a.defaults.classifier_dropout = 0.2;
  embedding_names(a);
  set(a, R::query_weight, "transformer.layer.{}.attention.q_lin.weight");
  set(a, R::query_bias, "transformer.layer.{}.attention.q_lin.bias");
  set(a, R::key_weight, "transformer.layer.{}.attention.k_lin.weight");
  set(a, R::key_bias, "transformer.layer.{}.attention.k_lin.bias");
  set(a, R::value_weight, "transformer.layer.{}.attention.v_lin.weight");
  set(a, R::value_bias, "transformer.layer.{}.attention.v_lin.bias");
  set(a, R::attn_out_weight, "transformer.layer.{}.attention.out_lin.weight");
  set(a, R::attn_out_bias, "transformer.layer.{}.attention.out_lin.bias");
  set(a, R::attn_ln_weight, "transformer.layer.{}.sa_layer_norm.weight");
  set(a, R::attn_ln_bias, "transformer.layer.{}.sa_layer_norm.bias");
  set(a, R::ffn_in_weight, "transformer.layer.{}.ffn.lin1.weight");
  set(a, R::ffn_in_bias, "transformer.layer.{}.ffn.lin1.bias");
  set(a, R::ffn_out_weight, "transformer.layer.{}.ffn.lin2.weight");
  set(a, R::ffn_out_bias, "transformer.layer.{}.ffn.lin2.bias");
  set(a, R::ffn_ln_weight, "transformer.layer.{}.output_layer_norm.weight");
  set(a, R::ffn_ln_bias, "transformer.layer.{}.output_layer_norm.bias");
  // DistilBertForSequenceClassification: h[CLS], pre_classifier, ReLU, dropout, classifier.
  set(a, R::head_dense_weight, "pre_classifier.weight");
  set(a, R::head_dense_bias, "pre_classifier.bias");
  set(a, R::head_out_weight, "classifier.weight");
  set(a, R::head_out_bias, "classifier.bias");
  a.head_activation = HeadActivation::relu;
  return a;
}

// MPNet: RoBERTa-style positions, no token types, its own attention names, and
// a relative-position bias (T5's bucket function, 32 buckets, max distance
// 128) added to every layer's attention scores from one table.
Architecture mpnet() {
  Architecture a = named(ModelType::mpnet, "mpnet", "MPNet", "mpnet.", "MPNetForSequenceClassification");
  a.positions = PositionScheme::after_padding;
  a.token_types = false;
  a.fields.type_vocab_size = "";
  a.fields.classifier_dropout = "";  // MPNetClassificationHead uses hidden_dropout_prob
  a.fields.relative_attention_num_buckets = "relative_attention_num_buckets";
  a.defaults.vocab_size = 30527;
  a.defaults.max_position_embeddings = 514;
  a.defaults.pad_token_id = 1;
  a.defaults.type_vocab_size = 0;
  a.defaults.relative_attention_num_buckets = 32;
  embedding_names(a);
  set(a, R::relative_attention_bias, "encoder.relative_attention_bias.weight");
  set(a, R::query_weight, "encoder.layer.{}.attention.attn.q.weight");
  set(a, R::query_bias, "encoder.layer.{}.attention.attn.q.bias");
  set(a, R::key_weight, "encoder.layer.{}.attention.attn.k.weight");
  set(a, R::key_bias, "encoder.layer.{}.attention.attn.k.bias");
  set(a, R::value_weight, "encoder.layer.{}.attention.attn.v.weight");
  set(a, R::value_bias, "encoder.layer.{}.attention.attn.v.bias");
  set(a, R::attn_out_weight, "encoder.layer.{}.attention.attn.o.weight");
  set(a, R::attn_out_bias, "encoder.layer.{}.attention.attn.o.bias");
  set(a, R::attn_ln_weight, "encoder.layer.{}.attention.LayerNorm.weight");
  set(a, R::attn_ln_bias, "encoder.layer.{}.attention.LayerNorm.bias");
  bert_ffn_names(a);
  set(a, R::pooler_weight, "pooler.dense.weight");
  set(a, R::pooler_bias, "pooler.dense.bias");
  dense_out_proj_head(a, HeadActivation::tanh);
  return a;
}

// Qwen2 and Qwen3 (LayerFamily::decoder). The bare model's names
// (Qwen3-Embedding saves Qwen3Model: no prefix); *ForSequenceClassification
// and *ForCausalLM put "model." before them. Qwen2 has q/k/v biases and no
// q/k norm; Qwen3 has the norm, and biases only with "attention_bias": true.
Architecture qwen(ModelType type, std::string_view model_type, std::string_view display,
                  std::string_view classifier) {
  Architecture a = named(type, model_type, display, "model.", classifier);
  const bool qwen3 = type == ModelType::qwen3;
  a.family = LayerFamily::decoder;
  a.gated_ffn = true;  // SwiGLU: gate_proj and up_proj stacked [gate | up]
  a.glu_act_on_second = false;
  a.token_types = false;
  a.tokenizer = TokenizerFamily::bytelevel_bpe;
  a.fields.layer_norm_eps = "rms_norm_eps";
  a.fields.type_vocab_size = "";
  a.fields.hidden_dropout = "";
  a.fields.attention_dropout = "attention_dropout";
  a.fields.classifier_dropout = "";
  a.fields.attention_bias = qwen3 ? "attention_bias" : "";
  a.defaults = ConfigDefaults{};
  a.defaults.vocab_size = 151936;
  a.defaults.hidden_size = 4096;
  a.defaults.num_hidden_layers = 32;
  a.defaults.num_attention_heads = 32;
  a.defaults.intermediate_size = 22016;
  a.defaults.max_position_embeddings = 32768;
  a.defaults.type_vocab_size = 0;
  a.defaults.layer_norm_eps = 1e-6;
  a.defaults.hidden_dropout = 0.0;
  a.defaults.attention_dropout = 0.0;
  a.defaults.classifier_dropout = 0.0;
  set(a, R::word_embeddings, "embed_tokens.weight");
  set(a, R::query_weight, "layers.{}.self_attn.q_proj.weight");
  set(a, R::key_weight, "layers.{}.self_attn.k_proj.weight");
  set(a, R::value_weight, "layers.{}.self_attn.v_proj.weight");
  set(a, R::query_bias, "layers.{}.self_attn.q_proj.bias");
  set(a, R::key_bias, "layers.{}.self_attn.k_proj.bias");
  set(a, R::value_bias, "layers.{}.self_attn.v_proj.bias");
  set(a, R::attn_out_weight, "layers.{}.self_attn.o_proj.weight");
  if (qwen3) {
    set(a, R::attn_out_bias, "layers.{}.self_attn.o_proj.bias");
    set(a, R::q_norm_weight, "layers.{}.self_attn.q_norm.weight");
    set(a, R::k_norm_weight, "layers.{}.self_attn.k_norm.weight");
  }
  set(a, R::attn_ln_weight, "layers.{}.input_layernorm.weight");
  set(a, R::ffn_gate_weight, "layers.{}.mlp.gate_proj.weight");
  set(a, R::ffn_in_weight, "layers.{}.mlp.up_proj.weight");
  set(a, R::ffn_out_weight, "layers.{}.mlp.down_proj.weight");
  set(a, R::ffn_ln_weight, "layers.{}.post_attention_layernorm.weight");
  set(a, R::final_norm_weight, "norm.weight");
  set(a, R::head_out_weight, "score.weight");  // Qwen*ForSequenceClassification: no dense, no bias
  return a;
}

// ModernBERT (answerdotai/ModernBERT-*, and the embedders built on it:
// nomic-ai/modernbert-embed-base, Alibaba-NLP/gte-modernbert-base, ...):
// LayerFamily::prenorm_encoder. ModernBertForSequenceClassification saves the base
// model under "model." and its head ("head.dense", "head.norm") and
// classifier ("classifier", with a bias) without; bare ModernBertModel
// exports have no prefix. Config fields: hidden_activation, norm_eps, and
// the rest read by parse_hf_config's ModernBERT part.
Architecture modernbert() {
  Architecture a = named(ModelType::modernbert, "modernbert", "ModernBERT", "model.",
                         "ModernBertForSequenceClassification");
  a.family = LayerFamily::prenorm_encoder;
  a.token_types = false;
  a.tokenizer = TokenizerFamily::bytelevel_bpe;
  a.fields.hidden_act = "hidden_activation";
  a.fields.layer_norm_eps = "norm_eps";
  a.fields.type_vocab_size = "";
  a.fields.hidden_dropout = "mlp_dropout";
  a.fields.attention_dropout = "attention_dropout";
  a.fields.classifier_dropout = "classifier_dropout";
  a.defaults = ConfigDefaults{};
  a.defaults.vocab_size = 50368;
  a.defaults.hidden_size = 768;
  a.defaults.num_hidden_layers = 22;
  a.defaults.num_attention_heads = 12;
  a.defaults.intermediate_size = 1152;
  a.defaults.max_position_embeddings = 8192;
  a.defaults.type_vocab_size = 0;
  a.defaults.layer_norm_eps = 1e-5;
  a.defaults.pad_token_id = 50283;
  a.defaults.hidden_dropout = 0.0;
  a.defaults.attention_dropout = 0.0;
  a.defaults.classifier_dropout = 0.0;
  set(a, R::word_embeddings, "embeddings.tok_embeddings.weight");
  set(a, R::embeddings_ln_weight, "embeddings.norm.weight");
  set(a, R::qkv_weight, "layers.{}.attn.Wqkv.weight");
  set(a, R::attn_out_weight, "layers.{}.attn.Wo.weight");
  set(a, R::attn_ln_weight, "layers.{}.attn_norm.weight");  // absent in layer 0 (identity)
  set(a, R::ffn_ln_weight, "layers.{}.mlp_norm.weight");
  set(a, R::ffn_in_weight, "layers.{}.mlp.Wi.weight");      // (2I, H): [input | gate], GELU on the input half
  set(a, R::ffn_out_weight, "layers.{}.mlp.Wo.weight");
  set(a, R::final_norm_weight, "final_norm.weight");
  set(a, R::head_dense_weight, "head.dense.weight");
  set(a, R::head_norm_weight, "head.norm.weight");
  set(a, R::head_out_weight, "classifier.weight");
  set(a, R::head_out_bias, "classifier.bias");
  a.head_activation = HeadActivation::gelu;
  return a;
}

// GTE (Alibaba's "new" architecture: gte-*-en-v1.5, gte-multilingual-base,
// arctic-embed-m-v2.0): post-LN, rotary positions (NeoX rotate-half), q/k/v
// fused in one qkv_proj with biases, a GLU feed-forward [up | gate] without
// bias (act = hidden_act, GELU) and a down projection with bias, word (+
// token type) embeddings and LayerNorm, BERT's pooler + classifier.
// transformers 5 saves GteModel with these same names (its conversion
// mapping turns them back on save), under "gte." in the sequence
// classifier; the hub's remote code uses "new.". Two config spellings:
// model_type "new" (hub: rope_theta, rope_scaling, NewConfig's defaults) and
// "gte" (transformers 5: rope_parameters, GteConfig's defaults).
Architecture gte_like(ModelType type, std::string_view model_type, std::string_view prefix,
                      std::string_view classifier) {
  Architecture a = named(type, model_type, "GTE", prefix, classifier);
  const bool hub = type == ModelType::gte_hub;
  a.positions = PositionScheme::rotary;
  a.gated_ffn = true;
  a.glu_act_on_second = true;
  a.glu_inner_dropout = true;
  a.defaults.vocab_size = hub ? 30528 : 250048;
  a.defaults.max_position_embeddings = hub ? 2048 : 8192;
  a.defaults.type_vocab_size = 1;
  a.defaults.pad_token_id = hub ? 0 : 1;
  a.defaults.attention_dropout = 0.0;
  a.defaults.rope_theta = hub ? 10000.0 : 160000.0;
  set(a, R::word_embeddings, "embeddings.word_embeddings.weight");
  set(a, R::token_type_embeddings, "embeddings.token_type_embeddings.weight");
  set(a, R::embeddings_ln_weight, "embeddings.LayerNorm.weight");
  set(a, R::embeddings_ln_bias, "embeddings.LayerNorm.bias");
  set(a, R::qkv_weight, "encoder.layer.{}.attention.qkv_proj.weight");
  set(a, R::qkv_bias, "encoder.layer.{}.attention.qkv_proj.bias");
  set(a, R::attn_out_weight, "encoder.layer.{}.attention.o_proj.weight");
  set(a, R::attn_out_bias, "encoder.layer.{}.attention.o_proj.bias");
  set(a, R::attn_ln_weight, "encoder.layer.{}.attn_ln.weight");
  set(a, R::attn_ln_bias, "encoder.layer.{}.attn_ln.bias");
  set(a, R::ffn_up_gate_weight, "encoder.layer.{}.mlp.up_gate_proj.weight");
  set(a, R::ffn_out_weight, "encoder.layer.{}.mlp.down_proj.weight");
  set(a, R::ffn_out_bias, "encoder.layer.{}.mlp.down_proj.bias");
  set(a, R::ffn_ln_weight, "encoder.layer.{}.mlp_ln.weight");
  set(a, R::ffn_ln_bias, "encoder.layer.{}.mlp_ln.bias");
  set(a, R::pooler_weight, "pooler.dense.weight");
  set(a, R::pooler_bias, "pooler.dense.bias");
  set(a, R::head_out_weight, "classifier.weight");
  set(a, R::head_out_bias, "classifier.bias");
  a.head_on_pooler = true;  // GtePooler / NewPooler: tanh(dense(h[first])), dropout, classifier
  a.head_activation = HeadActivation::tanh;
  return a;
}

// NomicBERT (nomic-embed-text-v1 / v1.5): post-LN, rotary (rotate-half),
// q/k/v fused in Wqkv, SwiGLU with fc11 = up and fc12 = gate ([up | gate]),
// fc2 down, no biases in the layers (the hub configs' qkv_proj_bias,
// mlp_fc1_bias, mlp_fc2_bias are false; transformers 5 has none), word +
// token type embeddings and emb_ln, BERT's pooler + classifier. transformers
// 5 saves the hub's names, under "nomic_bert." in the sequence classifier.
Architecture nomic_bert() {
  Architecture a = named(ModelType::nomic_bert, "nomic_bert", "NomicBERT", "nomic_bert.",
                         "NomicBertForSequenceClassification");
  a.positions = PositionScheme::rotary;
  a.gated_ffn = true;
  a.glu_act_on_second = true;
  a.glu_inner_dropout = false;
  a.defaults.vocab_size = 30528;
  a.defaults.max_position_embeddings = 2048;
  a.defaults.hidden_dropout = 0.0;
  a.defaults.attention_dropout = 0.0;
  a.defaults.rope_theta = 1000.0;
  a.defaults.hidden_act = "silu";
  set(a, R::word_embeddings, "embeddings.word_embeddings.weight");
  set(a, R::token_type_embeddings, "embeddings.token_type_embeddings.weight");
  set(a, R::embeddings_ln_weight, "emb_ln.weight");
  set(a, R::embeddings_ln_bias, "emb_ln.bias");
  set(a, R::qkv_weight, "encoder.layers.{}.attn.Wqkv.weight");
  set(a, R::attn_out_weight, "encoder.layers.{}.attn.out_proj.weight");
  set(a, R::attn_ln_weight, "encoder.layers.{}.norm1.weight");
  set(a, R::attn_ln_bias, "encoder.layers.{}.norm1.bias");
  set(a, R::ffn_in_weight, "encoder.layers.{}.mlp.fc11.weight");
  set(a, R::ffn_gate_weight, "encoder.layers.{}.mlp.fc12.weight");
  set(a, R::ffn_out_weight, "encoder.layers.{}.mlp.fc2.weight");
  set(a, R::ffn_ln_weight, "encoder.layers.{}.norm2.weight");
  set(a, R::ffn_ln_bias, "encoder.layers.{}.norm2.bias");
  set(a, R::pooler_weight, "pooler.dense.weight");
  set(a, R::pooler_bias, "pooler.dense.bias");
  set(a, R::head_out_weight, "classifier.weight");
  set(a, R::head_out_bias, "classifier.bias");
  a.head_on_pooler = true;  // NomicBertPooler: tanh(dense(h[first])), dropout, classifier
  a.head_activation = HeadActivation::tanh;
  return a;
}

const std::vector<Architecture>& table() {
  static const std::vector<Architecture> t = [] {
    std::vector<Architecture> entries = {
      bert(),
      roberta_like(ModelType::roberta, "roberta", "RoBERTa", "RobertaForSequenceClassification",
                   TokenizerFamily::bytelevel_bpe, 50265),
      roberta_like(ModelType::xlm_roberta, "xlm-roberta", "XLM-RoBERTa", "XLMRobertaForSequenceClassification",
                   TokenizerFamily::sentencepiece, 30522),
      roberta_like(ModelType::camembert, "camembert", "CamemBERT", "CamembertForSequenceClassification",
                   TokenizerFamily::sentencepiece, 30522),
      electra(),
      distilbert(),
      mpnet(),
      qwen(ModelType::qwen2, "qwen2", "Qwen2", "Qwen2ForSequenceClassification"),
      qwen(ModelType::qwen3, "qwen3", "Qwen3", "Qwen3ForSequenceClassification"),
      gte_like(ModelType::gte_hub, "new", "new.", "NewForSequenceClassification"),
      gte_like(ModelType::gte, "gte", "gte.", "GteForSequenceClassification"),
      nomic_bert(),
      modernbert(),
    };
    return entries;
  }();
  return t;
}

}  // namespace

bool role_is_per_layer(TensorRole r) {
  return (r >= R::query_weight && r <= R::ffn_ln_bias) || (r >= R::q_norm_weight && r <= R::ffn_gate_weight) ||
         (r >= R::qkv_weight && r <= R::ffn_up_gate_weight);
}

std::string Architecture::tensor_name(TensorRole r, int64_t layer) const {
  std::string n(name_of(r));
  const size_t at = n.find("{}");
  if (at != std::string::npos) n.replace(at, 2, std::to_string(layer));
  return n;
}

const Architecture* find_architecture(std::string_view model_type) {
  for (const Architecture& a : table())
    if (a.model_type == model_type) return &a;
  return nullptr;
}

const Architecture& architecture_of(ModelType t) {
  for (const Architecture& a : table())
    if (a.type == t) return a;
  return table().front();
}

std::string supported_model_types() {
  std::string s;
  for (const Architecture& a : table()) s += (s.empty() ? "" : ", ") + std::string(a.model_type);
  return s;
}

std::string_view head_activation_name(HeadActivation a) {
  switch (a) {
    case HeadActivation::tanh: return "tanh";
    case HeadActivation::gelu: return "gelu";
    case HeadActivation::relu: return "relu";
  }
  return "?";
}

std::string_view tokenizer_family_name(TokenizerFamily f) {
  switch (f) {
    case TokenizerFamily::wordpiece: return "WordPiece";
    case TokenizerFamily::sentencepiece: return "SentencePiece Unigram";
    case TokenizerFamily::bytelevel_bpe: return "ByteLevel BPE";
  }
  return "?";
}

}  // namespace stoke
