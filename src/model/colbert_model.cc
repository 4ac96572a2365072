#include "model/colbert_model.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace stoke {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json read_json_object(const fs::path& file, bool required) {
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    if (required) throw Error(Errc::not_found, file.string() + ": not found");
    return json::object();
  }
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(Errc::format, file.string() + ": expected a JSON object");
  return j;
}

[[noreturn]] void bad_field(const fs::path& file, const char* field, const std::string& expected, const json& got) {
  throw Error(Errc::format, file.string() + ": field \"" + field + "\": expected " + expected + ", got " + got.dump());
}

// A field that is absent or null keeps PyLate's default.
const json* field(const json& cfg, const char* name) {
  auto it = cfg.find(name);
  return it == cfg.end() || it->is_null() ? nullptr : &*it;
}

// tokenizer_config.json's mask token (a string, or an object's "content"),
// else the tokenizer class's default, as transformers' mask_token.
std::optional<std::string> mask_token(const fs::path& model_dir) {
  const fs::path file = model_dir / "tokenizer_config.json";
  const json cfg = read_json_object(file, false);
  if (const json* m = field(cfg, "mask_token")) {
    if (m->is_string()) return m->get<std::string>();
    if (m->is_object() && m->contains("content") && (*m)["content"].is_string()) return (*m)["content"].get<std::string>();
    bad_field(file, "mask_token", "a token string or an object with \"content\"", *m);
  }
  const std::string cls = cfg.value("tokenizer_class", std::string());
  if (cls.rfind("Bert", 0) == 0 || cls.rfind("DistilBert", 0) == 0 || cls.rfind("Electra", 0) == 0) return "[MASK]";
  if (cls.rfind("XLMRoberta", 0) == 0 || cls.rfind("Roberta", 0) == 0 || cls.rfind("Camembert", 0) == 0) return "<mask>";
  return std::nullopt;
}

}  // namespace

ColbertSettings read_colbert_settings(const fs::path& model_dir, const HfConfig& config, const Tokenizer& tokenizer) {
  const fs::path file = model_dir / "config_sentence_transformers.json";
  const json cfg = read_json_object(file, false);
  ColbertSettings s;
  auto text = [&](const char* name, std::string& out) {
    if (const json* v = field(cfg, name)) {
      if (!v->is_string()) bad_field(file, name, "a string", *v);
      out = v->get<std::string>();
    }
  };
  auto length = [&](const char* name, int64_t& out) {
    if (const json* v = field(cfg, name)) {
      if (!v->is_number_integer() || v->get<int64_t>() < 1) bad_field(file, name, "a positive integer", *v);
      out = v->get<int64_t>();
    }
    const int64_t usable = config.usable_positions();
    if (out > usable)
      throw Error(Errc::invalid_argument, file.string() + ": field \"" + name + "\": " + std::to_string(out) +
                                              " tokens, more than the model's " + std::to_string(usable) +
                                              " usable positions");
  };
  auto flag = [&](const char* name, bool& out) {
    if (const json* v = field(cfg, name)) {
      if (!v->is_boolean()) bad_field(file, name, "true or false", *v);
      out = v->get<bool>();
    }
  };
  text("query_prefix", s.query_prefix);
  text("document_prefix", s.document_prefix);
  length("query_length", s.query_length);
  length("document_length", s.document_length);
  flag("do_query_expansion", s.do_query_expansion);
  flag("attend_to_expansion_tokens", s.attend_to_expansion_tokens);
  if (!s.do_query_expansion) s.attend_to_expansion_tokens = false;  // PyLate: no expansion, nothing to attend to
  if (const json* v = field(cfg, "skiplist_words")) {
    if (!v->is_array()) bad_field(file, "skiplist_words", "a list of strings", *v);
    for (const json& w : *v) {
      if (!w.is_string()) bad_field(file, "skiplist_words", "a list of strings", w);
      s.skiplist_words.push_back(w.get<std::string>());
    }
  } else {
    for (char c : std::string("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")) s.skiplist_words.emplace_back(1, c);  // string.punctuation
  }
  if (const json* def = field(cfg, "default_prompt_name")) {
    const std::string name = def->is_string() ? def->get<std::string>() : def->dump();
    const json* prompts = field(cfg, "prompts");
    const json* prompt = prompts && prompts->is_object() ? field(*prompts, name.c_str()) : nullptr;
    if (prompt && !(prompt->is_string() && prompt->get<std::string>().empty()))
      throw Error(Errc::unsupported, file.string() + ": field \"default_prompt_name\": \"" + name +
                                         "\": stoke runs ColBERT models without a default prompt");
  }
  // convert_tokens_to_ids: an added token or a vocabulary entry; anything
  // else is the UNK id.
  auto id_of = [&](const std::string& token) {
    const int32_t id = tokenizer.token_to_id(token);
    return id >= 0 ? id : tokenizer.unk_id();
  };
  // A prefix must be a token of its own (PyLate adds it to the tokenizer and
  // saves it; a tokenizer without it would map it to UNK, or PyLate would
  // grow the embeddings by a random row at load).
  auto prefix_id = [&](const std::string& prefix, const char* name) -> int32_t {
    if (prefix.empty()) return -1;
    const int32_t id = tokenizer.token_to_id(prefix);
    if (id < 0)
      throw Error(Errc::invalid_argument, file.string() + ": field \"" + name + "\": \"" + prefix +
                                              "\" is not a token of the tokenizer (PyLate adds its prefixes to the "
                                              "tokenizer it saves)");
    return id;
  };
  s.query_prefix_id = prefix_id(s.query_prefix, "query_prefix");
  s.document_prefix_id = prefix_id(s.document_prefix, "document_prefix");
  for (const std::string& w : s.skiplist_words) s.skiplist_ids.push_back(id_of(w));
  std::sort(s.skiplist_ids.begin(), s.skiplist_ids.end());
  s.skiplist_ids.erase(std::unique(s.skiplist_ids.begin(), s.skiplist_ids.end()), s.skiplist_ids.end());
  const std::optional<std::string> mask = mask_token(model_dir);
  const int32_t mask_id = mask ? tokenizer.token_to_id(*mask) : -1;
  if (mask_id < 0)
    throw Error(Errc::unsupported, (model_dir / "tokenizer_config.json").string() +
                                       ": no mask token in the vocabulary; a ColBERT model's queries are expanded "
                                       "with it (PyLate's EOS fallback is not supported)");
  s.mask_id = mask_id;
  if (s.query_length < 2 + (s.query_prefix_id >= 0) || s.document_length < 2 + (s.document_prefix_id >= 0))
    throw Error(Errc::invalid_argument, file.string() + ": query_length " + std::to_string(s.query_length) +
                                            " / document_length " + std::to_string(s.document_length) +
                                            ": too short for the special tokens and the prefix");
  return s;
}

Encoding colbert_encode(const Tokenizer& tokenizer, const ColbertSettings& s, bool query, std::string_view text,
                        const EncodeOptions& encode, EncodeStats* stats) {
  const int32_t prefix = query ? s.query_prefix_id : s.document_prefix_id;
  const int64_t length = query ? s.query_length : s.document_length;
  EncodeOptions o = encode;
  o.truncate = true;
  o.max_length = static_cast<size_t>(prefix >= 0 ? length - 1 : length);  // Transformer.max_seq_length
  Encoding e = tokenizer.encode(text, o, stats);
  if (prefix >= 0) {  // insert_prefix_token: after the first id, token type 0
    const size_t at = std::min<size_t>(1, e.ids.size());
    e.ids.insert(e.ids.begin() + static_cast<std::ptrdiff_t>(at), prefix);
    e.type_ids.insert(e.type_ids.begin() + static_cast<std::ptrdiff_t>(std::min(at, e.type_ids.size())), 0);
  }
  if (query && s.do_query_expansion) {  // padding="max_length" with the pad token set to [MASK]
    e.ids.resize(static_cast<size_t>(length), s.mask_id);
    e.type_ids.resize(static_cast<size_t>(length), 0);
  }
  return e;
}

int32_t colbert_query_keys(std::span<const int32_t> ids, const ColbertSettings& s) {
  const auto n = static_cast<int32_t>(ids.size());
  if (!s.do_query_expansion || s.attend_to_expansion_tokens) return n;
  int32_t keys = n;
  while (keys > 1 && ids[static_cast<size_t>(keys) - 1] == s.mask_id) --keys;
  return keys;
}

bool colbert_keeps(const ColbertSettings& s, bool query, int32_t id) {
  return query || !std::binary_search(s.skiplist_ids.begin(), s.skiplist_ids.end(), id);
}

void load_colbert_modules(LoadedEncoder& encoder, const ModelFolder& folder, Backend& backend) {
  if (!folder.st.colbert) return;
  std::vector<DenseLayerParams> pooled = std::move(encoder.dense);
  encoder.dense.clear();
  load_dense_modules(encoder, folder.dir, folder.st.dense, backend);  // its checks: shapes, a chain from H
  encoder.colbert_dense = std::move(encoder.dense);
  encoder.dense = std::move(pooled);
}

}  // namespace stoke
