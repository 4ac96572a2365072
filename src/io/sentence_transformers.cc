#include "io/sentence_transformers.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/model_folder_error.h"

namespace stoke {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string_view pooling_name(Pooling p) {
  switch (p) {
    case Pooling::cls: return "cls";
    case Pooling::mean: return "mean";
    case Pooling::max: return "max";
    case Pooling::mean_sqrt_len: return "mean_sqrt_len";
    case Pooling::lasttoken: return "lasttoken";
  }
  return "?";
}

std::optional<Pooling> pooling_from_name(std::string_view n) {
  if (n == "cls" || n == "cls_token") return Pooling::cls;
  if (n == "mean" || n == "mean_tokens") return Pooling::mean;
  if (n == "max" || n == "max_tokens") return Pooling::max;
  if (n == "mean_sqrt_len" || n == "mean_sqrt_len_tokens") return Pooling::mean_sqrt_len;
  if (n == "lasttoken") return Pooling::lasttoken;
  return std::nullopt;
}

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

    const std::string kind = type.substr(type.rfind('.') == std::string::npos ? 0 : type.rfind('.') + 1);
    const bool ours = type.rfind("sentence_transformers.", 0) == 0;
    if (!ours || (kind != "Transformer" && kind != "Pooling" && kind != "Dense" && kind != "Normalize")) {
      throw Error(Errc::unsupported,
                  label + ": " + what + " is not supported: stoke runs Transformer -> Pooling -> Dense -> Normalize " +
                      "only" + (ours ? "" : " (and no modules outside sentence_transformers)"));
    }
    st.module_types.push_back(kind);

    if (kind == "Transformer") {
      if (seen_transformer || i != 0) {
        throw Error(Errc::unsupported, label + ": " + what + ": stoke runs one Transformer module, first");
      }
      seen_transformer = true;
      if (!path.empty() && !fs::is_regular_file(folder / path / "config.json", ec)) {
        throw Error(Errc::not_found, label + ": " + what + ": the Transformer module's folder has no config.json");
      }
      st.transformer_path = path;
    } else if (kind == "Pooling") {
      if (!seen_transformer || seen_pooling || seen_normalize) {
        throw Error(Errc::unsupported, label + ": " + what + ": stoke runs one Pooling module, after the Transformer");
      }
      seen_pooling = true;
      if (path.empty()) throw Error(Errc::format, label + ": " + what + ": a Pooling module needs its own folder");
      read_pooling(folder / path / "config.json", st);
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

  const fs::path transformer_dir = st.transformer_path.empty() ? folder : folder / st.transformer_path;
  if (const fs::path p = transformer_dir / "sentence_bert_config.json"; fs::exists(p, ec)) {
    const json cfg = read_object(p);
    st.max_seq_length = positive_int(cfg, "max_seq_length", p.string());
    st.do_lower_case = boolean(cfg, "do_lower_case", p.string());
  }

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
