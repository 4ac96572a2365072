#include "text/tokenizer_json_pipeline.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/model_folder_error.h"
#include "text/bpe.h"
#include "text/qwen2_split.h"
#include "text/unigram.h"

namespace stoke {

using json = nlohmann::json;

namespace {

std::string shown(const json& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

[[noreturn]] void bad(const std::string& label, const std::string& field, const std::string& expected,
                      const json& found) {
  throw Error(Errc::format, label + ": field \"" + field + "\": expected " + expected + ", found " + shown(found));
}

[[noreturn]] void unsupported(const std::string& label, const std::string& field, const std::string& value,
                              const std::string& supported) {
  throw Error(Errc::unsupported, label + ": field \"" + field + "\": " + value + " is not supported (supported: " +
                                     supported + ")");
}

const json* find(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

bool get_bool(const json& obj, const char* key, bool fallback, const std::string& label, const std::string& at) {
  const json* v = find(obj, key);
  if (!v) return fallback;
  if (!v->is_boolean()) bad(label, at + "." + key, "true or false", *v);
  return v->get<bool>();
}

std::string get_string(const json& obj, const char* key, const std::string& fallback, const std::string& label,
                       const std::string& at) {
  const json* v = find(obj, key);
  if (!v) return fallback;
  if (!v->is_string()) bad(label, at + "." + key, "a string", *v);
  return v->get<std::string>();
}

std::string type_of(const json& step, const std::string& label, const std::string& at) {
  if (!step.is_object()) bad(label, at, "an object with a \"type\"", step);
  const json* t = find(step, "type");
  if (!t || !t->is_string()) bad(label, at + ".type", "a string", step);
  return t->get<std::string>();
}

void add_normalizer(const json& step, const std::string& label, const std::string& at,
                    std::vector<NormalizerStep>& steps) {
  const std::string type = type_of(step, label, at);
  NormalizerStep s;
  using K = NormalizerStep::Kind;
  if (type == "Sequence") {
    const json* list = find(step, "normalizers");
    if (!list || !list->is_array()) bad(label, at + ".normalizers", "an array", step);
    for (size_t k = 0; k < list->size(); ++k)
      add_normalizer((*list)[k], label, at + ".normalizers[" + std::to_string(k) + "]", steps);
    return;
  }
  if (type == "Precompiled") {
    const json* blob = find(step, "precompiled_charsmap");
    s.kind = K::precompiled;
    if (!blob) {
      s.charsmap = std::make_shared<PrecompiledCharsmap>(std::string_view(), label);
    } else {
      if (!blob->is_string()) bad(label, at + ".precompiled_charsmap", "a base64 string", *blob);
      s.charsmap = std::make_shared<PrecompiledCharsmap>(PrecompiledCharsmap::from_base64(
          blob->get_ref<const std::string&>(), label + ": field \"" + at + ".precompiled_charsmap\""));
    }
    if (s.charsmap->empty()) return;
  } else if (type == "NFC") {
    s.kind = K::nfc;
  } else if (type == "NFD") {
    s.kind = K::nfd;
  } else if (type == "NFKC") {
    s.kind = K::nfkc;
  } else if (type == "NFKD") {
    s.kind = K::nfkd;
  } else if (type == "Lowercase") {
    s.kind = K::lowercase;
  } else if (type == "StripAccents") {
    s.kind = K::strip_accents;
  } else if (type == "Strip") {
    s.kind = K::strip;
    s.strip_left = get_bool(step, "strip_left", true, label, at);
    s.strip_right = get_bool(step, "strip_right", true, label, at);
  } else if (type == "Prepend") {
    s.kind = K::prepend;
    s.content = get_string(step, "prepend", "", label, at);
  } else if (type == "Replace") {
    s.kind = K::replace;
    const json* pattern = find(step, "pattern");
    if (!pattern || !pattern->is_object()) bad(label, at + ".pattern", "{\"String\": ...}", step);
    if (const json* str = find(*pattern, "String"); str && str->is_string()) {
      s.pattern = str->get<std::string>();
    } else {
      unsupported(label, at + ".pattern", shown(*pattern), "a String pattern; Regex patterns are not run");
    }
    s.content = get_string(step, "content", "", label, at);
  } else if (type == "BertNormalizer") {
    s.kind = K::bert;
    s.bert.clean_text = get_bool(step, "clean_text", true, label, at);
    s.bert.handle_chinese_chars = get_bool(step, "handle_chinese_chars", true, label, at);
    s.bert.lowercase = get_bool(step, "lowercase", true, label, at);
    if (const json* sa = find(step, "strip_accents")) {
      if (!sa->is_boolean()) bad(label, at + ".strip_accents", "true, false or null", *sa);
      s.bert.strip_accents = sa->get<bool>();
    }
  } else {
    unsupported(label, at + ".type", "\"" + type + "\"",
                "Precompiled, NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, Prepend, Replace, "
                "BertNormalizer, Sequence");
  }
  steps.push_back(std::move(s));
}

PrependScheme parse_prepend_scheme(const json& step, const std::string& label, const std::string& at) {
  if (const json* scheme = find(step, "prepend_scheme")) {
    const std::string v = scheme->is_string() ? scheme->get<std::string>() : "";
    if (v == "always") return PrependScheme::always;
    if (v == "first") return PrependScheme::first;
    if (v == "never") return PrependScheme::never;
    bad(label, at + ".prepend_scheme", "\"always\", \"first\" or \"never\"", *scheme);
  }
  // Files from before prepend_scheme: add_prefix_space true means "always".
  return get_bool(step, "add_prefix_space", true, label, at) ? PrependScheme::always : PrependScheme::never;
}

void add_pre_tokenizer(const json& step, const std::string& label, const std::string& at,
                       std::vector<PreTokenizerStep>& steps) {
  const std::string type = type_of(step, label, at);
  PreTokenizerStep s;
  using K = PreTokenizerStep::Kind;
  if (type == "Sequence") {
    const json* list = find(step, "pretokenizers");
    if (!list || !list->is_array()) bad(label, at + ".pretokenizers", "an array", step);
    for (size_t k = 0; k < list->size(); ++k)
      add_pre_tokenizer((*list)[k], label, at + ".pretokenizers[" + std::to_string(k) + "]", steps);
    return;
  }
  if (type == "WhitespaceSplit") {
    s.kind = K::whitespace_split;
  } else if (type == "Metaspace") {
    s.kind = K::metaspace;
    const std::string rep = get_string(step, "replacement", "\xE2\x96\x81", label, at);
    if (rep.empty()) bad(label, at + ".replacement", "one character", step["replacement"]);
    s.replacement = rep;
    s.prepend = parse_prepend_scheme(step, label, at);
    s.split = get_bool(step, "split", true, label, at);
  } else if (type == "ByteLevel") {
    s.kind = K::byte_level;
    s.add_prefix_space = get_bool(step, "add_prefix_space", true, label, at);
    s.use_regex = get_bool(step, "use_regex", true, label, at);
  } else if (type == "Split") {
    // Qwen2 / Qwen3: their one regex, each match isolated (text/qwen2_split.h).
    const json* pattern = find(step, "pattern");
    const json* regex = pattern ? find(*pattern, "Regex") : nullptr;
    if (!regex || !regex->is_string() || regex->get<std::string>() != kQwen2SplitPattern)
      unsupported(label, at + ".pattern", pattern ? shown(*pattern) : "null", "Qwen2's Regex pattern");
    const std::string behavior = get_string(step, "behavior", "", label, at);
    if (behavior != "Isolated") unsupported(label, at + ".behavior", "\"" + behavior + "\"", "\"Isolated\"");
    if (get_bool(step, "invert", false, label, at)) unsupported(label, at + ".invert", "true", "false");
    s.kind = K::split_qwen2;
  } else {
    unsupported(label, at + ".type", "\"" + type + "\"", "WhitespaceSplit, Metaspace, ByteLevel, Split (Qwen2's), Sequence");
  }
  steps.push_back(std::move(s));
}

std::pair<std::string, std::string> split_merge(const std::string& line, const std::string& label,
                                                const std::string& where) {
  const size_t space = line.find(' ');
  if (space == std::string::npos || space == 0 || space + 1 >= line.size() ||
      line.find(' ', space + 1) != std::string::npos) {
    throw Error(Errc::format, label + ": " + where + ": expected two tokens separated by one space, found \"" +
                                  line.substr(0, 60) + "\"");
  }
  return {line.substr(0, space), line.substr(space + 1)};
}

std::unordered_map<std::string, int32_t> parse_bpe_vocab(const json& vocab, const std::string& label,
                                                         const std::string& at) {
  if (!vocab.is_object() || vocab.empty()) bad(label, at, "a non-empty object of token -> id", vocab);
  std::unordered_map<std::string, int32_t> out;
  out.reserve(vocab.size());
  for (auto& [token, id] : vocab.items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= (uint64_t{1} << 28))
      bad(label, at + "[\"" + token + "\"]", "an id in 0..2^28", id);
    out[token] = id.get<int32_t>();
  }
  return out;
}

}  // namespace

TextNormalizer parse_pipeline_normalizer(const json& root, const std::string& label) {
  std::vector<NormalizerStep> steps;
  if (const json* n = find(root, "normalizer")) add_normalizer(*n, label, "normalizer", steps);
  return TextNormalizer(std::move(steps));
}

PreTokenizer parse_pipeline_pre_tokenizer(const json& root, const std::string& label) {
  std::vector<PreTokenizerStep> steps;
  if (const json* p = find(root, "pre_tokenizer")) add_pre_tokenizer(*p, label, "pre_tokenizer", steps);
  return PreTokenizer(std::move(steps));
}

std::unique_ptr<WordModel> parse_word_model(const json& model, const std::string& label) {
  const std::string type = get_string(model, "type", "", label, "model");
  if (type == "Unigram") {
    const json* vocab = find(model, "vocab");
    if (!vocab || !vocab->is_array()) bad(label, "model.vocab", "an array of [piece, score]", model);
    std::vector<std::pair<std::string, double>> pieces;
    pieces.reserve(vocab->size());
    for (size_t k = 0; k < vocab->size(); ++k) {
      const json& e = (*vocab)[k];
      if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
        bad(label, "model.vocab[" + std::to_string(k) + "]", "[piece, score]", e);
      pieces.emplace_back(e[0].get<std::string>(), e[1].get<double>());
    }
    const json* unk = find(model, "unk_id");
    if (!unk || !unk->is_number_unsigned() || unk->get<uint64_t>() > INT32_MAX)
      bad(label, "model.unk_id", "the id of the unknown piece", unk ? *unk : json());
    const bool byte_fallback = get_bool(model, "byte_fallback", false, label, "model");
    return std::make_unique<UnigramModel>(std::move(pieces), unk->get<int32_t>(), byte_fallback, label);
  }
  if (type == "BPE") {
    if (const json* d = find(model, "dropout"); d && !(d->is_number() && d->get<double>() == 0.0))
      unsupported(label, "model.dropout", shown(*d), "null: BPE dropout is random, stoke is exact");
    const json* vocab = find(model, "vocab");
    if (!vocab) bad(label, "model.vocab", "an object of token -> id", json());
    auto ids = parse_bpe_vocab(*vocab, label, "model.vocab");
    std::vector<std::pair<std::string, std::string>> merges;
    if (const json* m = find(model, "merges")) {
      if (!m->is_array()) bad(label, "model.merges", "an array", *m);
      merges.reserve(m->size());
      for (size_t k = 0; k < m->size(); ++k) {
        const json& e = (*m)[k];
        const std::string where = "field \"model.merges[" + std::to_string(k) + "]\"";
        if (e.is_string()) {
          merges.push_back(split_merge(e.get<std::string>(), label, where));
        } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
          merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
        } else {
          bad(label, "model.merges[" + std::to_string(k) + "]", "\"a b\" or [\"a\", \"b\"]", e);
        }
      }
    }
    BpeOptions o;
    if (const json* unk = find(model, "unk_token")) {
      if (!unk->is_string()) bad(label, "model.unk_token", "a string or null", *unk);
      o.unk_token = unk->get<std::string>();
    }
    o.continuing_subword_prefix = get_string(model, "continuing_subword_prefix", "", label, "model");
    o.end_of_word_suffix = get_string(model, "end_of_word_suffix", "", label, "model");
    o.fuse_unk = get_bool(model, "fuse_unk", false, label, "model");
    o.byte_fallback = get_bool(model, "byte_fallback", false, label, "model");
    o.ignore_merges = get_bool(model, "ignore_merges", false, label, "model");
    return std::make_unique<BpeModel>(std::move(ids), merges, std::move(o), label);
  }
  unsupported(label, "model.type", "\"" + type + "\"", "WordPiece, Unigram, BPE");
}

std::unique_ptr<WordModel> load_bpe_files(const std::string& vocab_text, const std::string& vocab_label,
                                          const std::string& merges_text, const std::string& merges_label) {
  const json vocab = parse_json_strict(vocab_text, vocab_label);
  auto ids = parse_bpe_vocab(vocab, vocab_label, "(top level)");
  std::vector<std::pair<std::string, std::string>> merges;
  size_t pos = 0, line_no = 0;
  while (pos < merges_text.size()) {
    size_t end = merges_text.find('\n', pos);
    if (end == std::string::npos) end = merges_text.size();
    std::string line = merges_text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // transformers skips the "#version" header and blank lines.
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    merges.push_back(split_merge(line, merges_label, "line " + std::to_string(line_no)));
  }
  BpeOptions o;  // RoBERTa's: no unk, no prefixes, no fallback
  return std::make_unique<BpeModel>(std::move(ids), merges, std::move(o), vocab_label);
}

}  // namespace stoke
