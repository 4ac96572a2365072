#include "io/hf_config.h"

#include <cmath>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/model_folder_error.h"

namespace stoke {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string_view model_type_name(ModelType t) { return architecture_of(t).model_type; }

std::string_view problem_type_name(ProblemType p) {
  switch (p) {
    case ProblemType::unspecified: return "";
    case ProblemType::single_label_classification: return "single_label_classification";
    case ProblemType::multi_label_classification: return "multi_label_classification";
    case ProblemType::regression: return "regression";
  }
  return "";
}

int64_t HfConfig::usable_positions() const {
  switch (arch->positions) {
    case PositionScheme::from_zero: return max_position_embeddings;
    case PositionScheme::after_padding: return max_position_embeddings - pad_token_id - 1;
    case PositionScheme::rotary: return max_position_embeddings;
  }
  return max_position_embeddings;
}

std::string_view HfConfig::checkpoint_prefix() const { return arch->checkpoint_prefix; }

namespace {

// Sizes are capped so that the product of any two fits in 64 bits.
constexpr int64_t kMaxSize = std::numeric_limits<int32_t>::max();

// A JSON value as it appears in the file, cut short when long.
std::string found(const json& v) {
  std::string s = v.dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

class Fields {
 public:
  Fields(const json& obj, const std::string& label) : obj_(obj), label_(label) {}

  [[noreturn]] void fail(Errc code, std::string_view field, const std::string& what) const {
    throw Error(code, label_ + ": field \"" + std::string(field) + "\": " + what);
  }
  [[noreturn]] void expected(std::string_view field, const std::string& what, const json& v) const {
    fail(Errc::format, field, "expected " + what + ", found " + found(v));
  }

  // nullptr when absent or null (both mean "use the default" in transformers).
  const json* get(std::string_view field) const {
    auto it = obj_.find(field);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  int64_t positive_int(std::string_view field, int64_t fallback) const {
    const json* v = get(field);
    if (!v) return fallback;
    if (!v->is_number_integer()) expected(field, "a positive integer", *v);
    if (v->is_number_unsigned()) {
      if (v->get<uint64_t>() > static_cast<uint64_t>(kMaxSize))
        expected(field, "a positive integer up to " + std::to_string(kMaxSize), *v);
    }
    const int64_t x = v->get<int64_t>();
    if (x <= 0) expected(field, "a positive integer", *v);
    if (x > kMaxSize) expected(field, "a positive integer up to " + std::to_string(kMaxSize), *v);
    return x;
  }

  int64_t non_negative_int(std::string_view field, int64_t fallback) const {
    const json* v = get(field);
    if (!v) return fallback;
    if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(kMaxSize)) ||
        v->get<int64_t>() < 0 || v->get<int64_t>() > kMaxSize)
      expected(field, "a non-negative integer", *v);
    return v->get<int64_t>();
  }

  // Dropout rates: read as transformers does, a number or the default
  // (training alone uses them; --dropout overrides them).
  double number_or(std::string_view field, double fallback) const {
    const json* v = get(field);
    return v && v->is_number() ? v->get<double>() : fallback;
  }

  double positive_number(std::string_view field, double fallback) const {
    const json* v = get(field);
    if (!v) return fallback;
    if (!v->is_number()) expected(field, "a positive number", *v);
    const double x = v->get<double>();
    if (!std::isfinite(x) || x <= 0) expected(field, "a positive number", *v);
    return x;
  }

  std::string string(std::string_view field, const std::string& fallback) const {
    const json* v = get(field);
    if (!v) return fallback;
    if (!v->is_string()) expected(field, "a string", *v);
    return v->get<std::string>();
  }

  bool boolean(std::string_view field, bool fallback) const {
    const json* v = get(field);
    if (!v) return fallback;
    if (!v->is_boolean()) expected(field, "true or false", *v);
    return v->get<bool>();
  }

  const std::string& label() const { return label_; }

 private:
  const json& obj_;
  const std::string& label_;
};

// "0", "17": decimal, no sign, no leading zeros (so "01" and "1" cannot both name id 1).
std::optional<int64_t> label_id(const std::string& key) {
  if (key.empty() || key.size() > 9) return std::nullopt;
  if (key.size() > 1 && key[0] == '0') return std::nullopt;
  int64_t v = 0;
  for (char c : key) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

void parse_labels(const Fields& f, HfConfig& c) {
  const json* id2label = f.get("id2label");
  const json* num_labels = f.get("num_labels");
  if (id2label) {
    if (!id2label->is_object()) f.expected("id2label", "an object of id -> label name", *id2label);
    const int64_t n = static_cast<int64_t>(id2label->size());
    if (n == 0) f.fail(Errc::format, "id2label", "is empty; a model has at least one label");
    c.id2label.assign(static_cast<size_t>(n), std::string());
    for (const auto& [key, value] : id2label->items()) {
      auto id = label_id(key);
      if (!id || *id >= n) {
        f.fail(Errc::format, "id2label",
               "key \"" + key + "\" is not an id in 0.." + std::to_string(n - 1) +
                   " (the keys must be exactly the ids 0..num_labels-1)");
      }
      if (!value.is_string()) f.expected("id2label", "label names (strings)", value);
      c.id2label[static_cast<size_t>(*id)] = value.get<std::string>();
    }
    // n keys, each a distinct id below n: every id is present (duplicates were refused by the parser).
    if (num_labels) {
      const int64_t declared = f.positive_int("num_labels", n);
      if (declared != n) {
        f.fail(Errc::format, "num_labels",
               std::to_string(declared) + " contradicts id2label, which names " + std::to_string(n) +
                   " labels");
      }
    }
  } else {
    // transformers' PretrainedConfig: num_labels (default 2) -> LABEL_0..LABEL_{n-1}.
    const int64_t n = f.positive_int("num_labels", 2);
    if (n > 1'000'000) f.expected("num_labels", "at most 1000000 labels", *num_labels);
    for (int64_t i = 0; i < n; ++i) c.id2label.push_back("LABEL_" + std::to_string(i));
  }

  if (const json* label2id = f.get("label2id")) {
    if (!label2id->is_object()) f.expected("label2id", "an object of label name -> id", *label2id);
    for (const auto& [name, value] : label2id->items()) {
      if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
          value.get<int64_t>() >= c.num_labels()) {
        f.fail(Errc::format, "label2id",
               "label \"" + name + "\" maps to " + found(value) + ", expected an id in 0.." +
                   std::to_string(c.num_labels() - 1));
      }
      c.label2id[name] = value.get<int64_t>();
    }
  } else {
    for (int64_t i = 0; i < c.num_labels(); ++i) c.label2id[c.id2label[static_cast<size_t>(i)]] = i;
  }
}

// The rotary settings of a decoder, in either schema: transformers 5's
// "rope_parameters" {"rope_type", "rope_theta", ...}, or the hub's older
// top-level "rope_theta" with "rope_scaling" (null or a dict). Only the
// default RoPE runs; any scaling is refused by its type.
double parse_rope_theta(const Fields& f, double default_theta = 10000.0) {
  auto rope_type_of = [&](std::string_view field, const json& dict) -> std::string {
    for (const char* key : {"rope_type", "type"}) {
      auto it = dict.find(key);
      if (it != dict.end() && it->is_string()) return it->get<std::string>();
    }
    f.expected(field, "an object with a \"rope_type\"", dict);
  };
  if (const json* rp = f.get("rope_parameters")) {
    if (!rp->is_object()) f.expected("rope_parameters", "an object", *rp);
    const std::string type = rope_type_of("rope_parameters", *rp);
    if (type != "default")
      f.fail(Errc::unsupported, "rope_parameters",
             "rope_type \"" + type + "\" is not supported; runs: \"default\" (no RoPE scaling)");
    auto pf = rp->find("partial_rotary_factor");
    if (pf != rp->end() && !(pf->is_number() && pf->get<double>() == 1.0))
      f.fail(Errc::unsupported, "rope_parameters", "partial_rotary_factor " + found(*pf) + " is not supported; runs: 1");
    auto theta = rp->find("rope_theta");
    if (theta == rp->end()) return f.positive_number("rope_theta", default_theta);
    if (!theta->is_number() || !(theta->get<double>() > 0) || !std::isfinite(theta->get<double>()))
      f.expected("rope_parameters", "a positive \"rope_theta\"", *theta);
    return theta->get<double>();
  }
  if (const json* rs = f.get("rope_scaling")) {
    if (!rs->is_object()) f.expected("rope_scaling", "null or an object", *rs);
    const std::string type = rope_type_of("rope_scaling", *rs);
    if (type != "default")
      f.fail(Errc::unsupported, "rope_scaling",
             "type \"" + type + "\" is not supported; runs: null (no RoPE scaling)" +
                 (type == "ntk" ? " (transformers has no \"ntk\" RoPE to check one against)" : ""));
  }
  return f.positive_number("rope_theta", default_theta);
}

// Qwen2 / Qwen3: grouped-query attention, head_dim, RoPE, biases, the
// attention's direction, and what stoke does not run, refused by name.
void parse_decoder_fields(const Fields& f, HfConfig& c) {
  const bool qwen3 = c.model_type == ModelType::qwen3;
  c.num_key_value_heads = f.positive_int("num_key_value_heads", c.num_attention_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    f.fail(Errc::format, "num_key_value_heads",
           std::to_string(c.num_key_value_heads) + " does not divide num_attention_heads = " +
               std::to_string(c.num_attention_heads));
  // Qwen3Config's head_dim defaults to 128; Qwen2's attention uses hidden_size / heads.
  const int64_t even = c.hidden_size % c.num_attention_heads == 0 ? c.hidden_size / c.num_attention_heads : 0;
  c.attention_head_dim = f.positive_int("head_dim", qwen3 ? 128 : even);
  if (c.attention_head_dim == 0)
    f.fail(Errc::format, "hidden_size",
           std::to_string(c.hidden_size) + " is not a multiple of num_attention_heads = " +
               std::to_string(c.num_attention_heads) + " and there is no \"head_dim\"");
  if (c.attention_head_dim % 2 != 0)
    f.fail(Errc::format, "head_dim", std::to_string(c.attention_head_dim) + " is odd; rotary pairs need an even head dim");
  c.rope_theta = parse_rope_theta(f);
  c.hidden_act = f.string("hidden_act", "silu");
  if (c.hidden_act != "silu")
    f.fail(Errc::unsupported, "hidden_act", "\"" + c.hidden_act + "\" is not supported; runs: \"silu\" (SwiGLU)");
  if (f.boolean("use_sliding_window", false))
    f.fail(Errc::unsupported, "use_sliding_window", "true is not supported; runs: false (full attention in every layer)");
  if (const json* types = f.get("layer_types")) {
    if (!types->is_array()) f.expected("layer_types", "a list of layer types", *types);
    for (const json& t : *types)
      if (!t.is_string() || t.get<std::string>() != "full_attention")
        f.fail(Errc::unsupported, "layer_types", found(t) + " is not supported; runs: \"full_attention\"");
  }
  c.attention_bias = qwen3 ? f.boolean(c.arch->fields.attention_bias, false) : true;
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  const json* is_causal = f.get("is_causal");
  c.causal = f.boolean("is_causal", true);
  // Remote code is never run; its fields are read as the transformers class
  // reads them. What the code changes beyond them must be stated by a field:
  // gte-Qwen2's modeling_qwen makes attention bidirectional, which nothing in
  // its config says, so such a folder needs "is_causal".
  if (const json* auto_map = f.get("auto_map")) {
    if (!auto_map->is_object()) f.expected("auto_map", "an object of class -> remote code", *auto_map);
    auto it = auto_map->find("AutoModel");
    c.remote_code = it != auto_map->end() && it->is_string() ? it->get<std::string>() : found(*auto_map);
    if (!is_causal)
      f.fail(Errc::unsupported, "auto_map",
             "remote code \"" + c.remote_code + "\" is not run, and whether its attention is causal is not stated "
             "(gte-Qwen2's is bidirectional); add \"is_causal\": false or true to config.json");
  }
}

// A "rope_parameters" entry of one layer type ({"rope_type": "default",
// "rope_theta": x}): its theta; any scaling is refused by its type.
double modernbert_layer_theta(const Fields& f, const json& rp, const char* type, double fallback) {
  auto it = rp.find(type);
  if (it == rp.end() || it->is_null()) return fallback;
  if (!it->is_object()) f.expected("rope_parameters", std::string("an object per layer type (\"") + type + "\")", *it);
  for (const char* key : {"rope_type", "type"}) {
    auto t = it->find(key);
    if (t != it->end() && !(t->is_string() && t->get<std::string>() == "default"))
      f.fail(Errc::unsupported, "rope_parameters",
             std::string(type) + ": rope_type " + found(*t) + " is not supported; runs: \"default\" (no RoPE scaling)");
  }
  auto theta = it->find("rope_theta");
  if (theta == it->end()) return fallback;
  if (!theta->is_number() || !(theta->get<double>() > 0) || !std::isfinite(theta->get<double>()))
    f.expected("rope_parameters", std::string("a positive \"rope_theta\" for ") + type, *theta);
  return theta->get<double>();
}

// ModernBERT, in the hub's schema (global_attn_every_n_layers,
// global_rope_theta, local_rope_theta) or transformers 5's (layer_types,
// rope_parameters per layer type). What no hub model sets and stoke does not
// run is refused by name: biases (norm_bias, attention_bias, mlp_bias,
// classifier_bias), another head activation, RoPE scaling.
void parse_modernbert_fields(const Fields& f, HfConfig& c) {
  for (const char* field : {"norm_bias", "attention_bias", "mlp_bias", "classifier_bias"})
    if (f.boolean(field, false))
      f.fail(Errc::unsupported, field, "true is not supported; runs: false (no ModernBERT on the hub has these biases)");
  const std::string head_act = f.string("classifier_activation", "gelu");
  if (head_act != "gelu")
    f.fail(Errc::unsupported, "classifier_activation", "\"" + head_act + "\" is not supported; runs: \"gelu\"");
  const std::string pooling = f.string("classifier_pooling", "cls");
  if (pooling != "cls" && pooling != "mean")
    f.fail(Errc::unsupported, "classifier_pooling", "\"" + pooling + "\" is not supported; runs: \"cls\", \"mean\"");
  c.classifier_mean_pooling = pooling == "mean";
  if ((c.hidden_size / c.num_attention_heads) % 2 != 0)
    f.fail(Errc::format, "hidden_size",
           "hidden_size / num_attention_heads = " + std::to_string(c.hidden_size / c.num_attention_heads) +
               " is odd; rotary pairs need an even head dim");
  // transformers: sliding_window = local_attention // 2, and a local layer's
  // query i sees keys j with |i - j| <= sliding_window.
  const int64_t local_attention = f.positive_int("local_attention", 128);
  if (local_attention < 2)
    f.fail(Errc::unsupported, "local_attention", std::to_string(local_attention) + " is not supported; runs: 2 or more");
  const int window = static_cast<int>(local_attention / 2);
  const auto L = static_cast<size_t>(c.num_hidden_layers);
  if (const json* types = f.get("layer_types")) {
    if (!types->is_array() || types->size() != L)
      f.expected("layer_types", "a list of num_hidden_layers = " + std::to_string(L) + " layer types", *types);
    for (const json& t : *types) {
      const std::string s = t.is_string() ? t.get<std::string>() : "";
      if (s != "full_attention" && s != "sliding_attention")
        f.fail(Errc::unsupported, "layer_types",
               found(t) + " is not supported; runs: \"full_attention\", \"sliding_attention\"");
      c.attention_window.push_back(s == "sliding_attention" ? window : 0);
    }
  } else {  // the hub's schema; transformers' default: every third layer global, from layer 0
    const int64_t every = f.positive_int("global_attn_every_n_layers", 3);
    for (size_t l = 0; l < L; ++l) c.attention_window.push_back(l % static_cast<size_t>(every) == 0 ? 0 : window);
  }
  if (const json* rs = f.get("rope_scaling"))
    f.fail(Errc::unsupported, "rope_scaling", found(*rs) + " is not supported; runs: null (no RoPE scaling)");
  c.rope_theta = f.positive_number("global_rope_theta", 160000.0);
  c.local_rope_theta = f.positive_number("local_rope_theta", 10000.0);
  if (const json* rp = f.get("rope_parameters")) {
    if (!rp->is_object()) f.expected("rope_parameters", "an object per layer type", *rp);
    c.rope_theta = modernbert_layer_theta(f, *rp, "full_attention", c.rope_theta);
    c.local_rope_theta = modernbert_layer_theta(f, *rp, "sliding_attention", c.local_rope_theta);
  }
}

// NomicBERT's hub configs name the sizes as GPT-2 does (n_embd, n_head, ...)
// and the activation "swiglu"; transformers 5 writes hidden_size, ... and
// "silu". Where a hub name is present it is read (the hub models' values
// are also transformers 5's defaults, which is how transformers reads them).
void parse_nomic_hub_names(const Fields& f, HfConfig& c) {
  c.hidden_size = f.positive_int("n_embd", c.hidden_size);
  c.embedding_size = c.hidden_size;
  c.num_attention_heads = f.positive_int("n_head", c.num_attention_heads);
  c.num_hidden_layers = f.positive_int("n_layer", c.num_hidden_layers);
  c.intermediate_size = f.positive_int("n_inner", c.intermediate_size);
  c.max_position_embeddings = f.positive_int("n_positions", c.max_position_embeddings);
  c.layer_norm_eps = f.positive_number("layer_norm_epsilon", c.layer_norm_eps);
  c.hidden_dropout = f.number_or("resid_pdrop", c.hidden_dropout);
  c.attention_dropout = f.number_or("attn_pdrop", c.attention_dropout);
  if (f.get("embd_pdrop") && f.number_or("embd_pdrop", 0) != c.hidden_dropout)
    f.fail(Errc::unsupported, "embd_pdrop", "differs from resid_pdrop; runs: one hidden dropout rate for both");
  if (f.get("activation_function")) {
    const std::string act = f.string("activation_function", "swiglu");
    if (act != "swiglu")
      f.fail(Errc::unsupported, "activation_function", "\"" + act + "\" is not supported; runs: \"swiglu\"");
    c.hidden_act = "silu";
  }
}

// NomicBERT's rotary and layer switches: what the hub models use and
// transformers 5 implements, the rest refused by name.
void parse_nomic_fields(const Fields& f, HfConfig& c) {
  if (f.get("rotary_emb_base")) c.rope_theta = f.positive_number("rotary_emb_base", c.rope_theta);
  if (const json* fr = f.get("rotary_emb_fraction"); fr && !(fr->is_number() && fr->get<double>() == 1.0))
    f.fail(Errc::unsupported, "rotary_emb_fraction", found(*fr) + " is not supported; runs: 1.0 (every head column rotated)");
  for (const char* flag : {"rotary_emb_interleaved", "qkv_proj_bias", "mlp_fc1_bias", "mlp_fc2_bias", "prenorm",
                           "causal", "use_rms_norm", "parallel_block", "scale_attn_by_inverse_layer_idx"})
    if (f.boolean(flag, false)) f.fail(Errc::unsupported, flag, "true is not supported; runs: false");
  // nomic-embed-text-v2-moe: mixture-of-experts feed-forward layers.
  for (const char* moe : {"moe_every_n_layers", "num_experts"})
    if (f.non_negative_int(moe, 0) > 0)
      f.fail(Errc::unsupported, moe, "> 0 (mixture-of-experts layers) is not supported; runs: dense SwiGLU layers");
  if (!f.boolean("scale_attn_weights", true))
    f.fail(Errc::unsupported, "scale_attn_weights", "false is not supported; runs: true (scores / sqrt(head dim))");
  for (const char* scaling : {"rotary_scaling_factor", "rotary_emb_scale_base"})
    if (const json* v = f.get(scaling)) f.fail(Errc::unsupported, scaling, found(*v) + " is not supported; runs: null");
  const int64_t d = c.hidden_size / c.num_attention_heads;
  if (f.get("head_dim") && f.positive_int("head_dim", d) != d)
    f.fail(Errc::unsupported, "head_dim", "is not hidden_size / num_attention_heads = " + std::to_string(d) + "; runs: that");
}

// Rotary + GLU encoders (GTE): the rotary settings in either schema, the
// GLU's activation, and the hub config's switches, refused where they differ
// from what runs. Remote code (auto_map) is named, never run: its fields are
// read as the transformers class reads them.
void parse_rotary_encoder_fields(const Fields& f, HfConfig& c) {
  const int64_t d = c.hidden_size / c.num_attention_heads;
  if (d % 2 != 0)
    f.fail(Errc::format, c.arch->fields.hidden_size,
           "gives a head dim of " + std::to_string(d) + ", odd; rotary pairs need an even head dim");
  c.rope_theta = parse_rope_theta(f, c.arch->defaults.rope_theta);
  c.rotary_dim = d;
  c.rotary_interleaved = false;
  if (c.model_type == ModelType::nomic_bert) parse_nomic_fields(f, c);
  if (c.hidden_act != "gelu" && c.hidden_act != "gelu_python" && c.hidden_act != "silu")
    f.fail(Errc::unsupported, c.arch->fields.hidden_act,
           "\"" + c.hidden_act + "\" is not supported; runs: \"gelu\", \"gelu_python\" (GeGLU, erf) or \"silu\" (SwiGLU)");
  // NewConfig's switches (transformers 5's GteConfig has none of them).
  const std::string norm = f.string("layer_norm_type", "layer_norm");
  if (norm != "layer_norm")
    f.fail(Errc::unsupported, "layer_norm_type", "\"" + norm + "\" is not supported; runs: \"layer_norm\"");
  for (const char* flag : {"logn_attention_scale", "logn_attention_clip1"})
    if (f.boolean(flag, false)) f.fail(Errc::unsupported, flag, "true is not supported; runs: false");
  if (!f.boolean("pack_qkv", true))
    f.fail(Errc::unsupported, "pack_qkv", "false is not supported; runs: true (one fused qkv_proj)");
  if (const json* auto_map = f.get("auto_map")) {
    if (!auto_map->is_object()) f.expected("auto_map", "an object of class -> remote code", *auto_map);
    auto it = auto_map->find("AutoModel");
    c.remote_code = it != auto_map->end() && it->is_string() ? it->get<std::string>() : found(*auto_map);
  }
}

}  // namespace

HfConfig parse_hf_config(std::string_view text, const std::string& label) {
  const json root = parse_json_strict(text, label);
  if (!root.is_object()) {
    throw Error(Errc::format, label + ": expected a JSON object, found " + std::string(root.type_name()));
  }
  Fields f(root, label);
  HfConfig c;

  const json* type = f.get("model_type");
  if (!type) {
    throw Error(Errc::not_found, label + ": field \"model_type\" is missing; stoke needs it to know the "
                                         "architecture (supported: " + supported_model_types() + ")");
  }
  if (!type->is_string()) f.expected("model_type", "a string", *type);
  c.model_type_name = type->get<std::string>();
  c.arch = find_architecture(c.model_type_name);
  if (!c.arch) {
    f.fail(Errc::unsupported, "model_type",
           "\"" + c.model_type_name + "\" is not supported; stoke runs " + supported_model_types());
  }
  c.model_type = c.arch->type;
  const Architecture& a = *c.arch;
  const ConfigFields& n = a.fields;
  const ConfigDefaults& d = a.defaults;

  // Field names and defaults come from the architecture (transformers' config class).
  c.vocab_size = f.positive_int("vocab_size", d.vocab_size);
  c.hidden_size = f.positive_int(n.hidden_size, d.hidden_size);
  c.num_hidden_layers = f.positive_int(n.num_hidden_layers, d.num_hidden_layers);
  c.num_attention_heads = f.positive_int(n.num_attention_heads, d.num_attention_heads);
  c.intermediate_size = f.positive_int(n.intermediate_size, d.intermediate_size);
  c.max_position_embeddings = f.positive_int("max_position_embeddings", d.max_position_embeddings);
  // Rotary encoders may have no type table (gte-base-en-v1.5: type_vocab_size 0).
  c.type_vocab_size = !a.token_types                        ? 0
                      : a.positions == PositionScheme::rotary ? f.non_negative_int(n.type_vocab_size, d.type_vocab_size)
                                                              : f.positive_int(n.type_vocab_size, d.type_vocab_size);
  c.embedding_size = c.hidden_size;
  if (a.embedding_projection)
    c.embedding_size = f.positive_int(n.embedding_size, d.embedding_size > 0 ? d.embedding_size : c.hidden_size);
  if (a.has(TensorRole::relative_attention_bias))
    c.relative_attention_num_buckets =
        f.positive_int(n.relative_attention_num_buckets, d.relative_attention_num_buckets);
  c.layer_norm_eps = n.layer_norm_eps.empty() ? d.layer_norm_eps : f.positive_number(n.layer_norm_eps, d.layer_norm_eps);
  c.pad_token_id = f.non_negative_int("pad_token_id", d.pad_token_id);
  c.hidden_act = f.string(n.hidden_act, std::string(d.hidden_act));
  const bool rotary = a.positions == PositionScheme::rotary;
  const std::string position_kind = rotary ? "rope" : "absolute";
  c.position_embedding_type = f.string("position_embedding_type", position_kind);
  c.hidden_dropout = f.number_or(n.hidden_dropout, d.hidden_dropout);
  c.attention_dropout = f.number_or(n.attention_dropout, d.attention_dropout);
  c.classifier_dropout = f.number_or(n.classifier_dropout, d.classifier_dropout < 0 ? c.hidden_dropout
                                                                                        : d.classifier_dropout);
  if (a.type == ModelType::nomic_bert) parse_nomic_hub_names(f, c);

  if (a.family == LayerFamily::decoder) {
    // pad_token_id is null in Qwen configs: -1, no pad token (the classifier
    // then reads the last token).
    c.pad_token_id = f.non_negative_int("pad_token_id", -1);
    parse_decoder_fields(f, c);
  }
  if (a.family == LayerFamily::prenorm_encoder && c.hidden_size % c.num_attention_heads == 0) parse_modernbert_fields(f, c);
  if (a.family != LayerFamily::decoder && c.hidden_size % c.num_attention_heads != 0) {
    f.fail(Errc::format, n.hidden_size,
           std::to_string(c.hidden_size) + " is not a multiple of " + std::string(n.num_attention_heads) + " = " +
               std::to_string(c.num_attention_heads));
  }
  if (c.pad_token_id >= c.vocab_size) {
    f.fail(Errc::format, "pad_token_id",
           std::to_string(c.pad_token_id) + " is not below vocab_size = " + std::to_string(c.vocab_size));
  }
  if (c.usable_positions() < 1) {
    f.fail(Errc::format, "max_position_embeddings",
           std::to_string(c.max_position_embeddings) + " leaves no usable position: " + c.model_type_name +
               " numbers positions from pad_token_id + 1 = " + std::to_string(c.pad_token_id + 1));
  }
  if (rotary) parse_rotary_encoder_fields(f, c);
  if (a.family != LayerFamily::decoder && !rotary && c.hidden_act != "gelu" && c.hidden_act != "gelu_python") {
    f.fail(Errc::unsupported, n.hidden_act,
           "\"" + c.hidden_act + "\" is not supported; runs: \"gelu\", \"gelu_python\" (the exact erf GELU)");
  }
  if (c.position_embedding_type != position_kind) {
    f.fail(Errc::unsupported, "position_embedding_type",
           "\"" + c.position_embedding_type + "\" is not supported; runs: \"" + position_kind + "\"");
  }
  // DistilBERT: sinusoidal positions are a frozen table training must not
  // update; stoke trains every table, so it refuses rather than drift.
  if (a.type == ModelType::distilbert && f.boolean("sinusoidal_pos_embds", false)) {
    f.fail(Errc::unsupported, "sinusoidal_pos_embds",
           "true is not supported; runs: false (learned position embeddings)");
  }
  if (a.family != LayerFamily::decoder && f.boolean("is_decoder", false)) {
    f.fail(Errc::unsupported, "is_decoder", "true is not supported; runs: false (bidirectional encoders)");
  }
  if (f.boolean("add_cross_attention", false)) {
    f.fail(Errc::unsupported, "add_cross_attention", "true is not supported; runs: false (encoders only)");
  }

  const std::string problem = f.string("problem_type", "");
  if (problem.empty() && f.get("problem_type") == nullptr) {
    c.problem_type = ProblemType::unspecified;
  } else if (problem == "single_label_classification") {
    c.problem_type = ProblemType::single_label_classification;
  } else if (problem == "multi_label_classification") {
    c.problem_type = ProblemType::multi_label_classification;
  } else if (problem == "regression") {
    c.problem_type = ProblemType::regression;
  } else {
    f.fail(Errc::format, "problem_type",
           "expected null, \"single_label_classification\", \"multi_label_classification\" or "
           "\"regression\", found \"" + problem + "\"");
  }

  if (const json* arch = f.get("architectures")) {
    if (!arch->is_array()) f.expected("architectures", "a list of class names", *arch);
    for (const auto& a : *arch) {
      if (!a.is_string()) f.expected("architectures", "a list of class names (strings)", a);
      c.architectures.push_back(a.get<std::string>());
    }
  }

  parse_labels(f, c);
  return c;
}

HfConfig load_hf_config(const fs::path& folder) {
  const fs::path path = folder / "config.json";
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw ModelFolderError(ModelFolderErrc::no_config,
                           folder.string() + ": no config.json; a Hugging Face model folder needs one");
  }
  return parse_hf_config(read_json_text(path, 16ull << 20), path.string());
}

}  // namespace stoke
