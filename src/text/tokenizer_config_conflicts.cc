#include "text/tokenizer_config_conflicts.h"

#include <functional>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace stoke {

using json = nlohmann::json;

namespace {

std::optional<bool> config_bool(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

// Every step of a normalizer or pre_tokenizer (Sequence flattened), with its field path.
void for_each_step(const json& step, const std::string& at, const char* list_key,
                   const std::function<void(const json&, const std::string&)>& f) {
  if (!step.is_object()) return;
  if (step.value("type", "") == "Sequence") {
    auto it = step.find(list_key);
    if (it == step.end() || !it->is_array()) return;
    for (size_t k = 0; k < it->size(); ++k)
      for_each_step((*it)[k], at + "." + list_key + "[" + std::to_string(k) + "]", list_key, f);
    return;
  }
  f(step, at);
}

std::string b(bool v) { return v ? "true" : "false"; }

[[noreturn]] void refuse(const std::string& json_label, const std::string& json_field, const std::string& json_value,
                         const std::string& config_label, const std::string& config_field,
                         const std::string& config_value, const std::string& fix) {
  throw Error(Errc::refused, json_label + " has " + json_field + " = " + json_value + " but " + config_label +
                                 " has " + config_field + " = " + config_value +
                                 ": the files disagree (transformers follows tokenizer_config.json); " + fix);
}

}  // namespace

void check_tokenizer_config_agrees(const json& tj, const std::string& tj_label, const json& cfg,
                                   const std::string& cfg_label) {
  if (!tj.is_object() || !cfg.is_object()) return;
  // A setting tokenizer_config.json leaves out is the tokenizer class's
  // default, which transformers 5 then runs (BertTokenizer lowercases unless
  // told not to, whatever tokenizer.json says).
  std::string cls = cfg.value("tokenizer_class", "");
  if (cls.size() > 4 && cls.compare(cls.size() - 4, 4, "Fast") == 0) cls.resize(cls.size() - 4);
  const bool bert_class = cls == "BertTokenizer" || cls == "DistilBertTokenizer" || cls == "ElectraTokenizer" ||
                          cls == "MPNetTokenizer";
  const bool roberta_class = cls == "RobertaTokenizer";
  std::optional<bool> lower = config_bool(cfg, "do_lower_case");
  std::optional<bool> chinese = config_bool(cfg, "tokenize_chinese_chars");
  std::optional<bool> prefix = config_bool(cfg, "add_prefix_space");
  std::string lower_shown = lower ? b(*lower) : "";
  std::string chinese_shown = chinese ? b(*chinese) : "";
  std::string prefix_shown = prefix ? b(*prefix) : "";
  if (bert_class && !lower) {
    lower = true;
    lower_shown = "(absent: " + cls + "'s default true)";
  }
  if (bert_class && !chinese) {
    chinese = true;
    chinese_shown = "(absent: " + cls + "'s default true)";
  }
  if (roberta_class && !prefix) {
    prefix = false;
    prefix_shown = "(absent: " + cls + "'s default false)";
  }
  const bool has_strip = cfg.contains("strip_accents") && (cfg["strip_accents"].is_null() || cfg["strip_accents"].is_boolean());

  if (auto n = tj.find("normalizer"); n != tj.end()) {
    for_each_step(*n, "normalizer", "normalizers", [&](const json& step, const std::string& at) {
      if (step.value("type", "") != "BertNormalizer") return;
      const bool tj_lower = step.value("lowercase", true);
      if (lower && *lower != tj_lower) {
        refuse(tj_label, at + ".lowercase", b(tj_lower), cfg_label, "do_lower_case", lower_shown,
               "edit tokenizer.json's " + at + ".lowercase to " + b(*lower) +
                   " to get what transformers gives, or tokenizer_config.json's do_lower_case to " + b(tj_lower));
      }
      const bool tj_chinese = step.value("handle_chinese_chars", true);
      if (chinese && *chinese != tj_chinese) {
        refuse(tj_label, at + ".handle_chinese_chars", b(tj_chinese), cfg_label, "tokenize_chinese_chars",
               chinese_shown,
               "edit tokenizer.json's " + at + ".handle_chinese_chars to " + b(*chinese) +
                   " to get what transformers gives");
      }
      if (has_strip) {
        // Unset strip_accents means "strip when lowercasing" on both sides.
        const json& cs = cfg["strip_accents"];
        const bool cfg_strip = cs.is_boolean() ? cs.get<bool>() : lower.value_or(tj_lower);
        auto ts = step.find("strip_accents");
        const bool tj_strip = (ts != step.end() && ts->is_boolean()) ? ts->get<bool>() : tj_lower;
        if (cfg_strip != tj_strip) {
          refuse(tj_label, at + ".strip_accents", ts != step.end() ? ts->dump() : "null (" + b(tj_strip) + ")",
                 cfg_label, "strip_accents", cs.dump() + (cs.is_null() ? " (" + b(cfg_strip) + ")" : ""),
                 "edit tokenizer.json's " + at + ".strip_accents to " + b(cfg_strip) +
                     " to get what transformers gives");
        }
      }
    });
  }
  if (!prefix) return;
  if (auto p = tj.find("pre_tokenizer"); p != tj.end()) {
    for_each_step(*p, "pre_tokenizer", "pretokenizers", [&](const json& step, const std::string& at) {
      const std::string type = step.value("type", "");
      if (type == "ByteLevel") {
        const bool tj_prefix = step.value("add_prefix_space", true);
        if (tj_prefix != *prefix) {
          refuse(tj_label, at + ".add_prefix_space", b(tj_prefix), cfg_label, "add_prefix_space", prefix_shown,
                 "edit tokenizer.json's " + at + ".add_prefix_space to " + b(*prefix) +
                     " to get what transformers gives");
        }
      } else if (type == "Metaspace" && step.contains("prepend_scheme") && step["prepend_scheme"].is_string()) {
        // transformers maps add_prefix_space true/false to "always"/"never".
        const std::string scheme = step["prepend_scheme"].get<std::string>();
        const std::string want = *prefix ? "always" : "never";
        if (scheme != want && !(scheme == "first" && *prefix)) {
          refuse(tj_label, at + ".prepend_scheme", "\"" + scheme + "\"", cfg_label, "add_prefix_space", prefix_shown,
                 "edit tokenizer.json's " + at + ".prepend_scheme to \"" + want + "\" to get what transformers gives");
        }
      }
    });
  }
}

std::string transformers_pipeline_difference(const json& tj, const json& cfg) {
  if (!tj.is_object() || !cfg.is_object()) return "";
  const std::string cls = cfg.value("tokenizer_class", "");
  if (cls != "XLMRobertaTokenizer" && cls != "CamembertTokenizer" && cls != "XLMRobertaTokenizerFast" &&
      cls != "CamembertTokenizerFast")
    return "";
  auto model = tj.find("model");
  if (model == tj.end() || !model->is_object() || model->value("type", "") != "Unigram") return "";
  const std::string runs = "; transformers 5's " + cls + " (tokenizer_config.json tokenizer_class) runs ";
  auto dump = [](const json& v) {
    std::string s = v.dump();
    return s.size() > 100 ? s.substr(0, 97) + "..." : s;
  };

  // Normalizer: one Precompiled step, or none.
  const json norm = tj.contains("normalizer") ? tj["normalizer"] : json();
  std::vector<json> steps;
  if (norm.is_object() && norm.value("type", "") == "Sequence" && norm.contains("normalizers") &&
      norm["normalizers"].is_array())
    steps.assign(norm["normalizers"].begin(), norm["normalizers"].end());
  else if (!norm.is_null())
    steps.push_back(norm);
  bool has_charsmap = false;
  for (const json& st : steps)
    if (st.is_object() && st.value("type", "") == "Precompiled" && st.contains("precompiled_charsmap")) {
      has_charsmap = true;
      break;
    }
  const bool norm_ok = steps.empty() ? true
                                     : (steps.size() == 1 && steps[0].is_object() &&
                                        steps[0].value("type", "") == "Precompiled");
  if (!norm_ok) {
    return "field \"normalizer\" is " + dump(norm) + runs +
           (has_charsmap ? "its Precompiled charsmap alone" : "no normalizer");
  }
  // Pre-tokenizer: WhitespaceSplit, then Metaspace "▁" with the config's scheme, split.
  const bool prefix = cfg.contains("add_prefix_space") && cfg["add_prefix_space"].is_boolean()
                          ? cfg["add_prefix_space"].get<bool>()
                          : true;
  const std::string scheme = prefix ? "always" : "never";
  const json pre = tj.contains("pre_tokenizer") ? tj["pre_tokenizer"] : json();
  bool pre_ok = pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers") &&
                pre["pretokenizers"].is_array() && pre["pretokenizers"].size() == 2;
  if (pre_ok) {
    const json& ws = pre["pretokenizers"][0];
    const json& ms = pre["pretokenizers"][1];
    pre_ok = ws.is_object() && ws.value("type", "") == "WhitespaceSplit" && ms.is_object() &&
             ms.value("type", "") == "Metaspace" && ms.value("replacement", "") == "\xE2\x96\x81" &&
             ms.value("prepend_scheme", "") == scheme && ms.value("split", true);
  }
  if (!pre_ok) {
    return "field \"pre_tokenizer\" is " + dump(pre) + runs + "WhitespaceSplit + Metaspace(\"\xE2\x96\x81\", \"" +
           scheme + "\", split)";
  }
  // Model: no byte fallback; unk_id: the unk token's index (XLM-R: 3).
  if (model->value("byte_fallback", false)) return "field \"model.byte_fallback\" is true" + runs + "without it";
  return "";
}

}  // namespace stoke
