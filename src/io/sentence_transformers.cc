#include "io/sentence_transformers.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/model_folder_error.h"

namespace stoke {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string_view splade_strategy_name(SpladeModule::Strategy s) {
  return s == SpladeModule::Strategy::sum ? "sum" : "max";
}

std::string_view splade_activation_name(const SpladeModule& m) { return m.log1p_count == 2 ? "log1p_relu" : "relu"; }

namespace {

constexpr uint64_t kMaxJson = 16ull << 20;

std::string found(const json& v) {
  std::string s = v.dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

[[noreturn]] void field_error(const std::string& label, std::string_view field, const std::string& expected,
                              const json& v) {
  throw Error(Errc::format, label + ": field \"" + std::string(field) + "\": expected " + expected + ", found " +
                                found(v));
}

json read_object(const fs::path& path) {
  const std::string label = path.string();
  json root = parse_json_strict(read_json_text(path, kMaxJson), label);
  if (!root.is_object()) throw Error(Errc::format, label + ": expected a JSON object");
  return root;
}

// nullptr when absent or null.
const json* get(const json& obj, std::string_view field) {
  auto it = obj.find(field);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::optional<int64_t> positive_int(const json& obj, std::string_view field, const std::string& label) {
  const json* v = get(obj, field);
  if (!v) return std::nullopt;
  if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > (1ull << 31)) ||
      v->get<int64_t>() <= 0 || v->get<int64_t>() > (int64_t{1} << 31)) {
    field_error(label, field, "a positive integer", *v);
  }
  return v->get<int64_t>();
}

std::optional<bool> boolean(const json& obj, std::string_view field, const std::string& label) {
  const json* v = get(obj, field);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) field_error(label, field, "true or false", *v);
  return v->get<bool>();
}

// The legacy boolean flags and the mode each stands for; sentence-transformers
// (Pooling.__init__) defaults pooling_mode_mean_tokens to true, the rest to false.
struct ModeFlag {
  const char* key;
  const char* mode;
  bool default_on;
};
constexpr ModeFlag kModeFlags[] = {
    {"pooling_mode_cls_token", "cls", false},
    {"pooling_mode_mean_tokens", "mean", true},
    {"pooling_mode_max_tokens", "max", false},
    {"pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len_tokens", false},
    {"pooling_mode_weightedmean_tokens", "weightedmean", false},
    {"pooling_mode_lasttoken", "lasttoken", false},
};

void read_pooling(const fs::path& path, SentenceTransformersConfig& st) {
  const json cfg = read_object(path);
  const std::string label = path.string();
  st.word_embedding_dimension = positive_int(cfg, "word_embedding_dimension", label);
  st.include_prompt = boolean(cfg, "include_prompt", label).value_or(true);

  std::vector<std::string> on;
  if (const json* mode = get(cfg, "pooling_mode")) {
    // The string form wins over the flags, as in sentence-transformers.
    if (!mode->is_string()) field_error(label, "pooling_mode", "a string such as \"mean\"", *mode);
    std::string name = mode->get<std::string>();
    for (char& ch : name) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    on.push_back(name);
  } else {
    for (const ModeFlag& f : kModeFlags) {
      if (boolean(cfg, f.key, label).value_or(f.default_on)) on.push_back(f.mode);
    }
    // A flag of a mode newer than this reader: refuse rather than ignore it.
    for (const auto& [key, value] : cfg.items()) {
      if (key.rfind("pooling_mode_", 0) != 0) continue;
      bool known = false;
      for (const ModeFlag& f : kModeFlags) known = known || key == f.key;
      if (!known && value.is_boolean() && value.get<bool>()) {
        throw Error(Errc::unsupported, label + ": pooling flag \"" + key + "\" is not supported; stoke runs "
                                               "cls, mean, max, mean_sqrt_len_tokens or lasttoken pooling");
      }
    }
  }
  if (on.empty()) throw Error(Errc::format, label + ": no pooling mode is on (every pooling_mode_* flag is false)");
  if (on.size() > 1) {
    std::string joined;
    for (const auto& m : on) joined += (joined.empty() ? "" : "+") + m;
    throw Error(Errc::unsupported,
                label + ": stoke runs one pooling mode; this model concatenates " + joined +
                    " (sentence-transformers joins several modes into one longer vector)");
  }
  if (on[0] == "weightedmean" || on[0] == "weightedmean_tokens") {
    throw Error(Errc::unsupported,
                label + ": pooling mode \"weightedmean\" is not supported; stoke runs cls, mean, max, "
                        "mean_sqrt_len_tokens or lasttoken");
  }
  st.pooling = pooling_from_name(on[0]);
  if (!st.pooling) {
    throw Error(Errc::format, label + ": field \"pooling_mode\": unknown mode \"" + on[0] +
                                  "\"; expected cls, mean, max, mean_sqrt_len_tokens or lasttoken");
  }
}

// <module>/config.json of a Dense module. Activations are named by their
// torch class; anything but Tanh and Identity is refused by name.
DenseModule read_dense(const fs::path& folder, const std::string& path) {
  const fs::path file = folder / path / "config.json";
  const json cfg = read_object(file);
  const std::string label = file.string();
  DenseModule d;
  d.path = path;
  const auto in = positive_int(cfg, "in_features", label), out = positive_int(cfg, "out_features", label);
  if (!in) throw Error(Errc::format, label + ": field \"in_features\" is missing");
  if (!out) throw Error(Errc::format, label + ": field \"out_features\" is missing");
  d.in_features = *in;
  d.out_features = *out;
  d.bias = boolean(cfg, "bias", label).value_or(true);
  std::string act = "torch.nn.modules.activation.Tanh";  // Dense's default
  if (const json* a = get(cfg, "activation_function")) {
    if (!a->is_string()) field_error(label, "activation_function", "a torch class name", *a);
    act = a->get<std::string>();
  }
  if (act == "torch.nn.modules.activation.Tanh" || act == "torch.nn.Tanh") {
    d.activation = DenseModule::Activation::tanh;
  } else if (act == "torch.nn.modules.linear.Identity" || act == "torch.nn.Identity") {
    d.activation = DenseModule::Activation::identity;
  } else {
    throw Error(Errc::unsupported, label + ": field \"activation_function\": \"" + act +
                                       "\" is not supported; runs: torch.nn.modules.activation.Tanh, "
                                       "torch.nn.modules.linear.Identity");
  }
  std::error_code ec;
  if (!fs::is_regular_file(folder / path / "model.safetensors", ec)) {
    const bool pickle = fs::exists(folder / path / "pytorch_model.bin", ec);
    throw Error(pickle ? Errc::refused : Errc::not_found,
                (folder / path).string() + ": no model.safetensors for the Dense module" +
                    (pickle ? " (pytorch_model.bin is pickle: stoke does not load pickle weights; convert to "
                              "safetensors)"
                            : ""));
  }
  return d;
}

// <module>/config.json of a SpladePooling module, as SpladePooling.__init__
// reads it (sentence-transformers 6.2.0): a key it does not take would be a
// TypeError there, so it is refused here.
SpladeModule read_splade_pooling(const fs::path& folder, const std::string& path) {
  const fs::path file = folder / path / "config.json";
  const json cfg = read_object(file);
  const std::string label = file.string();
  SpladeModule m;
  m.path = path;
  for (const auto& [key, value] : cfg.items()) {
    if (key == "pooling_strategy") {
      if (!value.is_string() || (value != "max" && value != "sum"))
        field_error(label, key, "\"max\" or \"sum\" (SpladePooling's pooling strategies)", value);
      m.strategy = value == "sum" ? SpladeModule::Strategy::sum : SpladeModule::Strategy::max;
    } else if (key == "activation_function") {
      if (!value.is_string() || (value != "relu" && value != "log1p_relu"))
        field_error(label, key, "\"relu\" or \"log1p_relu\" (SpladePooling's activations)", value);
      m.log1p_count = value == "log1p_relu" ? 2 : 1;
    } else if (key == "embedding_dimension" || key == "word_embedding_dimension") {
      m.embedding_dimension = positive_int(cfg, key, label);
    } else if (key == "chunk_size") {
      if (!value.is_null() && !value.is_number_integer()) field_error(label, key, "an integer or null", value);
    } else {
      throw Error(Errc::unsupported, label + ": field \"" + key +
                                         "\" is not a SpladePooling setting stoke knows (pooling_strategy, "
                                         "activation_function, embedding_dimension, chunk_size)");
    }
  }
  return m;
}

// Whether config_sentence_transformers.json names PyLate's model type
// (ColBERT.save writes "model_type": "ColBERT").
bool pylate_colbert_folder(const fs::path& folder) {
  const fs::path p = folder / "config_sentence_transformers.json";
  std::error_code ec;
  if (!fs::exists(p, ec)) return false;
  const json cfg = read_object(p);
  const json* type = get(cfg, "model_type");
  return type && type->is_string() && *type == "ColBERT";
}

// A Dense module of a ColBERT model: PyLate's Dense (models/Dense.py) adds
// use_residual to sentence-transformers' Dense; stoke runs it without.
DenseModule read_pylate_dense(const fs::path& folder, const std::string& path) {
  const fs::path file = folder / path / "config.json";
  const json cfg = read_object(file);
  if (const json* r = get(cfg, "use_residual")) {
    if (!r->is_boolean()) field_error(file.string(), "use_residual", "true or false", *r);
    if (r->get<bool>())
      throw Error(Errc::unsupported, file.string() + ": field \"use_residual\": true is not supported (stoke runs "
                                                     "PyLate's Dense without the residual projection)");
  }
  return read_dense(folder, path);
}

// A Router module (sentence_transformers.base.modules.router.Router, 6.x):
// router_config.json's "types" (folder -> class), "structure" (route -> its
// folders, in order) and "parameters". stoke runs the inference-free SPLADE
// one: "query" = [SparseStaticEmbedding], "document" = [MLMTransformer (or
// Transformer with transformer_task fill-mask), SpladePooling]. Fills the
// Transformer's folder, the SpladePooling and the query route's folder.
void read_splade_router(const fs::path& folder, const std::string& path, SentenceTransformersConfig& st) {
  const fs::path file = folder / path / "router_config.json";
  const json cfg = read_object(file);
  const std::string label = file.string();
  const json* types = get(cfg, "types");
  const json* structure = get(cfg, "structure");
  if (!types || !types->is_object()) field_error(label, "types", "an object of module folder -> class", types ? *types : json());
  if (!structure || !structure->is_object())
    field_error(label, "structure", "an object of route -> module folders", structure ? *structure : json());
  auto route = [&](const char* name) -> std::vector<std::pair<std::string, std::string>> {  // (folder, class kind)
    const json* r = get(*structure, name);
    if (!r || !r->is_array())
      throw Error(Errc::unsupported, label + ": field \"structure\": stoke runs a Router with a \"query\" and a "
                                             "\"document\" route (inference-free SPLADE); \"" + std::string(name) +
                                             "\" is missing");
    std::vector<std::pair<std::string, std::string>> out;
    for (const json& m : *r) {
      if (!m.is_string()) field_error(label, "structure", "module folder names", m);
      const std::string sub = m.get<std::string>();
      const json* t = get(*types, sub);
      if (!t || !t->is_string()) field_error(label, "types", "the class of module \"" + sub + "\"", t ? *t : json());
      const std::string type = t->get<std::string>();
      const std::string rel = path.empty() ? sub : path + "/" + sub;
      if (std::string why = folder_path_problem(folder, rel); !why.empty())
        throw Error(Errc::refused, label + ": module \"" + sub + "\": the path " + why);
      out.push_back({rel, type.substr(type.rfind('.') == std::string::npos ? 0 : type.rfind('.') + 1)});
    }
    return out;
  };
  if (structure->size() != 2) {
    throw Error(Errc::unsupported, label + ": field \"structure\": stoke runs a Router of exactly two routes, "
                                           "\"query\" and \"document\" (inference-free SPLADE)");
  }
  const auto query = route("query"), document = route("document");
  if (query.size() != 1 || query[0].second != "SparseStaticEmbedding")
    throw Error(Errc::unsupported, label + ": the \"query\" route: stoke runs one SparseStaticEmbedding there "
                                           "(inference-free SPLADE)");
  if (document.size() != 2 || (document[0].second != "MLMTransformer" && document[0].second != "Transformer") ||
      document[1].second != "SpladePooling")
    throw Error(Errc::unsupported, label + ": the \"document\" route: stoke runs MLMTransformer -> SpladePooling "
                                           "there (inference-free SPLADE)");
  if (const json* params = get(cfg, "parameters")) {
    if (const json* maps = params->is_object() ? get(*params, "route_mappings") : nullptr; maps && !maps->empty())
      throw Error(Errc::unsupported, label + ": field \"route_mappings\" is not supported; stoke picks the route "
                                             "by --role query|document");
  }
  if (document[0].second == "MLMTransformer") st.masked_lm = true;
  if (!fs::is_regular_file(folder / document[0].first / "config.json"))
    throw Error(Errc::not_found, label + ": module \"" + document[0].first + "\" has no config.json");
  st.transformer_path = document[0].first;
  st.splade = read_splade_pooling(folder, document[1].first);
  const fs::path q = folder / query[0].first / "config.json";
  if (fs::is_regular_file(q)) {
    const json qc = read_object(q);
    for (const auto& [key, value] : qc.items())
      if (key != "frozen")
        throw Error(Errc::unsupported, q.string() + ": field \"" + key +
                                           "\" is not supported (stoke reads the weights from model.safetensors)");
  }
  st.splade->static_query_path = query[0].first;
  st.module_types = {"Router"};
}

}  // namespace

SentenceTransformersConfig load_sentence_transformers(const fs::path& folder) {
  SentenceTransformersConfig st;
  const fs::path modules_path = folder / "modules.json";
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(modules_path, ec))) return st;
  st.present = true;
  const std::string label = modules_path.string();

  const json modules = parse_json_strict(read_json_text(modules_path, kMaxJson), label);
  if (!modules.is_array()) throw Error(Errc::format, label + ": expected a JSON list of modules");

  bool seen_transformer = false, seen_pooling = false, seen_normalize = false;
  // PyLate's ColBERT (model/colbert_model.h): its Dense modules run on every
  // token, with no Pooling. Its save marks it in config_sentence_transformers.json.
  st.colbert = pylate_colbert_folder(folder);
  for (size_t i = 0; i < modules.size(); ++i) {
    const json& m = modules[i];
    const std::string where = label + ": module " + std::to_string(i);
    if (!m.is_object()) throw Error(Errc::format, where + ": expected an object with \"type\" and \"path\"");
    const json* type_v = get(m, "type");
    if (!type_v || !type_v->is_string()) {
      throw Error(Errc::format, where + ": field \"type\": expected a class name such as "
                                        "\"sentence_transformers.models.Transformer\"");
    }
    const std::string type = type_v->get<std::string>();
    std::string path;
    if (const json* p = get(m, "path")) {
      if (!p->is_string()) field_error(where, "path", "a folder name", *p);
      path = p->get<std::string>();
    }
    const std::string what = "module \"" + type + "\" (path \"" + path + "\")";
    if (!path.empty()) {
      if (std::string why = folder_path_problem(folder, path); !why.empty()) {
        throw Error(Errc::refused, label + ": " + what + ": the path " + why);
      }
    }

    std::string kind = type.substr(type.rfind('.') == std::string::npos ? 0 : type.rfind('.') + 1);
    const bool pylate_dense = type == "pylate.models.Dense.Dense";
    if (pylate_dense) st.colbert = true;
    const bool ours = type.rfind("sentence_transformers.", 0) == 0 || pylate_dense;
    if (!ours || (kind != "Transformer" && kind != "Pooling" && kind != "Dense" && kind != "Normalize" &&
                  kind != "MLMTransformer" && kind != "SpladePooling" && kind != "Router")) {
      throw Error(Errc::unsupported,
                  label + ": " + what + " is not supported: stoke runs Transformer -> Pooling -> Dense -> Normalize " +
                      "and SPLADE's MLMTransformer -> SpladePooling only" +
                      (ours ? "" : " (and no modules outside sentence_transformers)"));
    }
    if (kind == "Router") {  // inference-free SPLADE: the whole model is its routes
      if (modules.size() != 1)
        throw Error(Errc::unsupported, label + ": " + what + ": stoke runs a Router only as the one module");
      read_splade_router(folder, path, st);
      seen_transformer = true;
      continue;
    }
    if (kind == "MLMTransformer") {  // a Transformer whose output is the MLM head's logits
      st.masked_lm = true;
      kind = "Transformer";
    }
    st.module_types.push_back(kind);
    if (st.splade && kind != "SpladePooling")
      throw Error(Errc::unsupported, label + ": " + what + ": stoke runs nothing after SpladePooling");

    if (kind == "Transformer") {
      if (seen_transformer || i != 0) {
        throw Error(Errc::unsupported, label + ": " + what + ": stoke runs one Transformer module, first");
      }
      seen_transformer = true;
      if (!path.empty() && !fs::is_regular_file(folder / path / "config.json", ec)) {
        throw Error(Errc::not_found, label + ": " + what + ": the Transformer module's folder has no config.json");
      }
      st.transformer_path = path;
    } else if (kind == "SpladePooling") {
      if (!seen_transformer || seen_pooling || st.splade) {
        throw Error(Errc::unsupported, label + ": " + what + ": stoke runs one SpladePooling module, after the Transformer");
      }
      if (path.empty()) throw Error(Errc::format, label + ": " + what + ": a SpladePooling module needs its own folder");
      st.splade = read_splade_pooling(folder, path);
    } else if (kind == "Pooling") {
      if (!seen_transformer || seen_pooling || seen_normalize) {
        throw Error(Errc::unsupported, label + ": " + what + ": stoke runs one Pooling module, after the Transformer");
      }
      seen_pooling = true;
      if (path.empty()) throw Error(Errc::format, label + ": " + what + ": a Pooling module needs its own folder");
      read_pooling(folder / path / "config.json", st);
    } else if (kind == "Dense" && st.colbert) {  // PyLate: per token, right after the Transformer
      if (!seen_transformer || seen_pooling || seen_normalize)
        throw Error(Errc::unsupported, label + ": " + what + ": a ColBERT model runs its Dense modules on every token, "
                                                             "with no Pooling or Normalize module");
      if (path.empty()) throw Error(Errc::format, label + ": " + what + ": a Dense module needs its own folder");
      st.dense.push_back(read_pylate_dense(folder, path));
    } else if (kind == "Dense") {
      if (!seen_pooling || seen_normalize) {
        throw Error(Errc::unsupported, label + ": " + what + ": stoke runs Dense after Pooling, before Normalize");
      }
      if (path.empty()) throw Error(Errc::format, label + ": " + what + ": a Dense module needs its own folder");
      st.dense.push_back(read_dense(folder, path));
    } else {  // Normalize: saves no files, so its folder need not exist.
      if (!seen_pooling || seen_normalize) {
        throw Error(Errc::unsupported, label + ": " + what + ": stoke runs Normalize once, after Pooling");
      }
      seen_normalize = true;
      st.normalize = true;
    }
  }
  if (!seen_transformer) throw Error(Errc::format, label + ": names no sentence_transformers.models.Transformer module");
  if (st.colbert && (seen_pooling || seen_normalize || st.dense.empty()))
    throw Error(Errc::unsupported, label + ": a ColBERT model (PyLate) is Transformer -> Dense modules on every token; "
                                           "this one has " + std::string(st.dense.empty() ? "no Dense module" : "a Pooling or Normalize module"));

  const fs::path transformer_dir = st.transformer_path.empty() ? folder : folder / st.transformer_path;
  if (const fs::path p = transformer_dir / "sentence_bert_config.json"; fs::exists(p, ec)) {
    const json cfg = read_object(p);
    st.max_seq_length = positive_int(cfg, "max_seq_length", p.string());
    st.do_lower_case = boolean(cfg, "do_lower_case", p.string());
    // sentence-transformers 5.4+: the Transformer's task says what it outputs.
    if (const json* task = get(cfg, "transformer_task")) {
      if (!task->is_string()) field_error(p.string(), "transformer_task", "a task name such as \"fill-mask\"", *task);
      if (*task == "fill-mask") {
        st.masked_lm = true;
      } else if (*task != "feature-extraction") {
        throw Error(Errc::unsupported, p.string() + ": field \"transformer_task\": \"" + task->get<std::string>() +
                                           "\" is not supported; stoke runs feature-extraction and fill-mask (SPLADE)");
      }
    }
  }
  if (st.masked_lm && !st.splade)
    throw Error(Errc::unsupported, label + ": the Transformer gives masked-LM logits, and no SpladePooling module "
                                           "follows it; stoke runs those logits only as a SPLADE sparse encoder");
  if (st.splade && !st.masked_lm)
    throw Error(Errc::unsupported, label + ": SpladePooling needs the Transformer's masked-LM logits "
                                           "(MLMTransformer, or sentence_bert_config.json \"transformer_task\": \"fill-mask\")");

  if (const fs::path p = folder / "config_sentence_transformers.json"; fs::exists(p, ec)) {
    const json cfg = read_object(p);
    const std::string plabel = p.string();
    if (const json* prompts = get(cfg, "prompts")) {
      if (!prompts->is_object()) field_error(plabel, "prompts", "an object of prompt name -> text", *prompts);
      for (const auto& [name, text] : prompts->items()) {
        if (!text.is_string()) field_error(plabel, "prompts", "prompt texts (strings)", text);
        st.prompts[name] = text.get<std::string>();
      }
    }
    if (const json* def = get(cfg, "default_prompt_name")) {
      if (!def->is_string()) field_error(plabel, "default_prompt_name", "a prompt name or null", *def);
      const std::string name = def->get<std::string>();
      if (!st.prompts.count(name)) {
        throw Error(Errc::format, plabel + ": field \"default_prompt_name\": \"" + name +
                                      "\" is not one of the prompts");
      }
      st.default_prompt_name = name;
    }
  }
  return st;
}

}  // namespace stoke
