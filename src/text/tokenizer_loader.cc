#include "text/tokenizer_loader.h"

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"
#include "io/model_folder_error.h"
#include "text/pipeline_model.h"
#include "text/sentencepiece_model.h"
#include "text/tokenizer_config_conflicts.h"
#include "text/tokenizer_json_pipeline.h"
#include "text/unigram.h"
#include "text/wordpiece.h"

namespace stoke {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Strict JSON (a key given twice is an error, not "the last one wins").
json parse_json(const std::string& text, const std::string& label) { return parse_json_strict(text, label); }

[[noreturn]] void bad_field(const std::string& label, const std::string& field, const std::string& expected,
                            const json& found) {
  std::string shown = found.dump();
  if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
  throw Error(Errc::format, label + ": field \"" + field + "\": expected " + expected + ", found " + shown);
}

bool get_bool(const json& obj, const char* key, bool fallback, const std::string& label) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) bad_field(label, key, "true or false", *it);
  return it->get<bool>();
}

std::optional<bool> get_optional_bool(const json& obj, const char* key, const std::string& label) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) bad_field(label, key, "true, false or null", *it);
  return it->get<bool>();
}

std::string get_string(const json& obj, const char* key, const std::string& fallback, const std::string& label) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_string()) bad_field(label, key, "a string", *it);
  return it->get<std::string>();
}

// tokenizer_config.json's model_max_length; transformers writes 1e30 for "no limit".
std::optional<int64_t> model_max_length(const json& cfg) {
  auto it = cfg.find("model_max_length");
  if (it == cfg.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  if (v <= 0 || v > 1e9) return std::nullopt;
  return static_cast<int64_t>(v);
}

// A special token in tokenizer_config.json / special_tokens_map.json: a plain
// string, or an AddedToken object {"content", "lstrip", "rstrip", ...}.
struct SpecialSpec {
  std::string content;
  bool lstrip = false, rstrip = false, single_word = false;
  bool is_object = false;
};

std::optional<SpecialSpec> special_spec(const json& cfg, const char* key, const std::string& label) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  SpecialSpec s;
  if (it->is_string()) {
    s.content = it->get<std::string>();
  } else if (it->is_object()) {
    s.is_object = true;
    s.content = get_string(*it, "content", "", label);
    s.lstrip = get_bool(*it, "lstrip", false, label);
    s.rstrip = get_bool(*it, "rstrip", false, label);
    s.single_word = get_bool(*it, "single_word", false, label);
  } else {
    bad_field(label, key, "a string or an AddedToken object", *it);
  }
  if (s.content.empty()) bad_field(label, key, "a non-empty token", *it);
  return s;
}

// transformers' slow tokenizers strip whitespace on both sides of a special
// token given as a plain string, and follow lstrip/rstrip for AddedToken objects.
AddedToken added_from_spec(const SpecialSpec& s, int32_t id) {
  AddedToken t;
  t.content = s.content;
  t.id = id;
  t.single_word = s.single_word;
  t.lstrip = s.is_object ? s.lstrip : true;
  t.rstrip = s.is_object ? s.rstrip : true;
  t.strip_in_offsets = s.is_object;
  return t;
}

void add_unique(std::vector<AddedToken>& tokens, AddedToken t) {
  for (auto& existing : tokens)
    if (existing.content == t.content) return;
  tokens.push_back(std::move(t));
}

TemplatePiece special_piece(int32_t id, int32_t type_id) {
  TemplatePiece p;
  p.ids = {id};
  p.type_id = type_id;
  return p;
}

TemplatePiece sequence_piece(int seq, int32_t type_id) {
  TemplatePiece p;
  p.is_sequence = true;
  p.sequence = seq;
  p.type_id = type_id;
  return p;
}

PostProcessor bert_template(int32_t cls, int32_t sep) {
  PostProcessor pp;
  pp.single = {special_piece(cls, 0), sequence_piece(0, 0), special_piece(sep, 0)};
  pp.pair = {special_piece(cls, 0), sequence_piece(0, 0), special_piece(sep, 0), sequence_piece(1, 1),
             special_piece(sep, 1)};
  return pp;
}

PostProcessor roberta_template(int32_t bos, int32_t eos) {
  PostProcessor pp;
  pp.single = {special_piece(bos, 0), sequence_piece(0, 0), special_piece(eos, 0)};
  pp.pair = {special_piece(bos, 0), sequence_piece(0, 0), special_piece(eos, 0), special_piece(eos, 0),
             sequence_piece(1, 0), special_piece(eos, 0)};
  return pp;
}

// ---- tokenizer.json ------------------------------------------------------

BertNormalizerOptions parse_normalizer(const json& root, const std::string& label) {
  BertNormalizerOptions opts;
  auto it = root.find("normalizer");
  if (it == root.end() || it->is_null()) {
    opts.clean_text = false;
    opts.handle_chinese_chars = false;
    opts.lowercase = false;
    opts.strip_accents = false;
    return opts;
  }
  const std::string type = it->is_object() ? get_string(*it, "type", "", label) : "";
  if (type != "BertNormalizer") {
    throw Error(Errc::unsupported, label + ": normalizer \"" + (type.empty() ? it->dump() : type) +
                                       "\" is not supported (stoke runs BertNormalizer with WordPiece)");
  }
  opts.clean_text = get_bool(*it, "clean_text", true, label);
  opts.handle_chinese_chars = get_bool(*it, "handle_chinese_chars", true, label);
  opts.lowercase = get_bool(*it, "lowercase", true, label);
  opts.strip_accents = get_optional_bool(*it, "strip_accents", label);
  return opts;
}

void check_pre_tokenizer(const json& root, const std::string& label) {
  auto it = root.find("pre_tokenizer");
  const std::string type = (it != root.end() && it->is_object()) ? get_string(*it, "type", "", label) : "";
  if (type != "BertPreTokenizer") {
    const std::string shown = (it == root.end() || it->is_null()) ? "null" : (type.empty() ? it->dump() : type);
    throw Error(Errc::unsupported, label + ": pre_tokenizer \"" + shown +
                                       "\" is not supported (stoke runs BertPreTokenizer with WordPiece)");
  }
}

std::unique_ptr<WordPieceModel> parse_wordpiece(const json& model, const BertNormalizerOptions& norm,
                                                const std::string& label) {
  WordPieceOptions wp;
  wp.unk_token = get_string(model, "unk_token", "[UNK]", label);
  wp.continuing_prefix = get_string(model, "continuing_subword_prefix", "##", label);
  if (auto it = model.find("max_input_chars_per_word"); it != model.end() && !it->is_null()) {
    if (!it->is_number_unsigned()) bad_field(label, "model.max_input_chars_per_word", "a non-negative integer", *it);
    wp.max_input_chars_per_word = it->get<size_t>();
  }
  auto vit = model.find("vocab");
  if (vit == model.end() || !vit->is_object() || vit->empty()) {
    throw Error(Errc::format, label + ": field \"model.vocab\": expected an object of token -> id");
  }
  std::vector<std::string> vocab(vit->size());
  std::vector<bool> seen(vit->size(), false);
  for (auto& [token, id] : vit->items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= vocab.size()) {
      throw Error(Errc::format, label + ": field \"model.vocab\": token \"" + token + "\" has id " + id.dump() +
                                    ", expected ids 0.." + std::to_string(vocab.size() - 1) + " without gaps");
    }
    const size_t k = id.get<size_t>();
    if (seen[k]) {
      throw Error(Errc::format, label + ": field \"model.vocab\": id " + std::to_string(k) +
                                    " is given to two tokens (\"" + vocab[k] + "\" and \"" + token + "\")");
    }
    seen[k] = true;
    vocab[k] = token;
  }
  return std::make_unique<WordPieceModel>(std::move(vocab), norm, wp);
}

std::vector<AddedToken> parse_added_tokens(const json& root, const std::string& label) {
  std::vector<AddedToken> tokens;
  auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return tokens;
  if (!it->is_array()) bad_field(label, "added_tokens", "an array", *it);
  for (const json& t : *it) {
    if (!t.is_object()) bad_field(label, "added_tokens[]", "an object", t);
    AddedToken a;
    a.content = get_string(t, "content", "", label);
    auto id = t.find("id");
    if (id == t.end() || !id->is_number_unsigned() || id->get<uint64_t>() > INT32_MAX)
      bad_field(label, "added_tokens[].id", "a non-negative integer", t);
    a.id = id->get<int32_t>();
    a.lstrip = get_bool(t, "lstrip", false, label);
    a.rstrip = get_bool(t, "rstrip", false, label);
    a.single_word = get_bool(t, "single_word", false, label);
    a.special = get_bool(t, "special", false, label);
    // tokenizers' default: special tokens are matched on the raw text.
    a.normalized = get_bool(t, "normalized", !a.special, label);
    if (a.content.empty()) bad_field(label, "added_tokens[].content", "a non-empty string", t);
    tokens.push_back(std::move(a));
  }
  return tokens;
}

PostProcessor parse_post_processor(const json& root, const SubwordModel& model, const std::string& label) {
  PostProcessor pp;
  auto it = root.find("post_processor");
  if (it == root.end() || it->is_null()) {
    pp.single = {sequence_piece(0, 0)};
    pp.pair = {sequence_piece(0, 0), sequence_piece(1, 1)};
    return pp;
  }
  const std::string type = it->is_object() ? get_string(*it, "type", "", label) : "";
  auto token_id_pair = [&](const char* key) -> int32_t {
    auto f = it->find(key);
    if (f == it->end() || !f->is_array() || f->size() != 2 || !(*f)[1].is_number_unsigned() ||
        (*f)[1].get<uint64_t>() > INT32_MAX)
      bad_field(label, std::string("post_processor.") + key, "[token, id]", f == it->end() ? json() : *f);
    return (*f)[1].get<int32_t>();
  };
  if (type == "BertProcessing") return bert_template(token_id_pair("cls"), token_id_pair("sep"));
  if (type == "RobertaProcessing") {
    PostProcessor roberta = roberta_template(token_id_pair("cls"), token_id_pair("sep"));
    // Only offsets depend on these (tokenizers' defaults: both true).
    roberta.trim_offsets = get_bool(*it, "trim_offsets", true, label);
    roberta.trim_add_prefix_space = get_bool(*it, "add_prefix_space", true, label);
    return roberta;
  }
  if (type != "TemplateProcessing") {
    throw Error(Errc::unsupported, label + ": post_processor \"" + (type.empty() ? it->dump() : type) +
                                       "\" is not supported (supported: TemplateProcessing, BertProcessing, "
                                       "RobertaProcessing)");
  }
  const json& specials = it->contains("special_tokens") ? (*it)["special_tokens"] : json::object();
  auto parse_template = [&](const char* key) {
    std::vector<TemplatePiece> pieces;
    auto t = it->find(key);
    if (t == it->end() || !t->is_array()) bad_field(label, std::string("post_processor.") + key, "an array", json());
    for (const json& item : *t) {
      if (item.contains("Sequence")) {
        const json& s = item["Sequence"];
        const std::string which = get_string(s, "id", "A", label);
        if (which != "A" && which != "B") bad_field(label, "post_processor.Sequence.id", "\"A\" or \"B\"", s);
        const json* type_id = s.contains("type_id") ? &s["type_id"] : nullptr;
        if (type_id && !(type_id->is_number_unsigned() && type_id->get<uint64_t>() < 16))
          bad_field(label, "post_processor.Sequence.type_id", "a small non-negative integer", *type_id);
        pieces.push_back(sequence_piece(which == "A" ? 0 : 1, type_id ? type_id->get<int32_t>() : 0));
      } else if (item.contains("SpecialToken")) {
        const json& s = item["SpecialToken"];
        const std::string name = get_string(s, "id", "", label);
        TemplatePiece p;
        const json* type_id = s.contains("type_id") ? &s["type_id"] : nullptr;
        if (type_id && !(type_id->is_number_unsigned() && type_id->get<uint64_t>() < 16))
          bad_field(label, "post_processor.SpecialToken.type_id", "a small non-negative integer", *type_id);
        p.type_id = type_id ? type_id->get<int32_t>() : 0;
        auto sp = specials.find(name);
        if (sp != specials.end() && sp->contains("ids") && (*sp)["ids"].is_array()) {
          for (const json& v : (*sp)["ids"]) {
            if (!v.is_number_unsigned() || v.get<uint64_t>() > INT32_MAX)
              bad_field(label, "post_processor.special_tokens." + name + ".ids", "non-negative ids", *sp);
            p.ids.push_back(v.get<int32_t>());
          }
        } else {
          const int32_t id = model.token_to_id(name);
          if (id < 0) bad_field(label, "post_processor.special_tokens", "an entry for \"" + name + "\"", specials);
          p.ids = {id};
        }
        pieces.push_back(std::move(p));
      } else {
        bad_field(label, std::string("post_processor.") + key + "[]", "Sequence or SpecialToken", item);
      }
    }
    return pieces;
  };
  pp.single = parse_template("single");
  pp.pair = parse_template("pair");
  return pp;
}

int32_t id_of(const SubwordModel& model, const std::vector<AddedToken>& added, const std::string& token) {
  for (const auto& t : added)
    if (t.content == token) return t.id;
  return model.token_to_id(token);
}

// tokenizer_config.json's added_tokens_decoder ({"id": AddedToken}) and
// added_tokens.json ({"token": id}): tokens added after training in folders
// without tokenizer.json.
void add_config_added_tokens(const json& cfg, const std::string& cfg_label, const fs::path& dir,
                             std::vector<AddedToken>& added) {
  if (auto it = cfg.find("added_tokens_decoder"); it != cfg.end() && !it->is_null()) {
    if (!it->is_object()) bad_field(cfg_label, "added_tokens_decoder", "an object of id -> AddedToken", *it);
    for (auto& [key, t] : it->items()) {
      AddedToken a;
      char* end = nullptr;
      const long long id = std::strtoll(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id > INT32_MAX)
        bad_field(cfg_label, "added_tokens_decoder", "decimal ids as keys", json(key));
      if (!t.is_object()) bad_field(cfg_label, "added_tokens_decoder." + key, "an AddedToken object", t);
      a.id = static_cast<int32_t>(id);
      a.content = get_string(t, "content", "", cfg_label);
      if (a.content.empty()) bad_field(cfg_label, "added_tokens_decoder." + key + ".content", "a token", t);
      a.lstrip = get_bool(t, "lstrip", false, cfg_label);
      a.rstrip = get_bool(t, "rstrip", false, cfg_label);
      a.single_word = get_bool(t, "single_word", false, cfg_label);
      a.special = get_bool(t, "special", false, cfg_label);
      a.normalized = get_bool(t, "normalized", !a.special, cfg_label);
      add_unique(added, std::move(a));
    }
  }
  const fs::path added_path = dir / "added_tokens.json";
  if (!dir.empty() && fs::exists(added_path)) {
    const json extra = parse_json(read_file(added_path), added_path.string());
    if (!extra.is_object()) throw Error(Errc::format, added_path.string() + ": expected an object of token -> id");
    for (auto& [token, id] : extra.items()) {
      if (!id.is_number_unsigned() || id.get<uint64_t>() > INT32_MAX)
        bad_field(added_path.string(), token, "a non-negative integer id", id);
      AddedToken t;
      t.content = token;
      t.id = id.get<int32_t>();
      t.special = false;
      add_unique(added, std::move(t));
    }
  }
}

// The pad token's id: tokenizer_config.json's pad_token, else a usual name.
int32_t pad_id_of(const SubwordModel& model, const std::vector<AddedToken>& added, const json& cfg,
                  const std::string& cfg_label) {
  if (cfg.is_object())
    if (auto p = special_spec(cfg, "pad_token", cfg_label))
      if (const int32_t id = id_of(model, added, p->content); id >= 0) return id;
  for (const char* name : {"[PAD]", "<pad>"})
    if (const int32_t id = id_of(model, added, name); id >= 0) return id;
  return 0;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& json_text, const std::string& label,
                                               const fs::path& model_dir) {
  const json root = parse_json(json_text, label);
  if (!root.is_object()) throw Error(Errc::format, label + ": expected a JSON object at the top level");
  auto mit = root.find("model");
  if (mit == root.end() || !mit->is_object()) throw Error(Errc::format, label + ": field \"model\" is missing");
  const std::string model_type = get_string(*mit, "type", "", label);

  // tokenizer_config.json beside it: model_max_length, the pad token, and
  // settings that must agree with this file.
  json cfg = json::object();
  std::string cfg_label;
  if (!model_dir.empty() && fs::exists(model_dir / "tokenizer_config.json")) {
    const fs::path cfg_path = model_dir / "tokenizer_config.json";
    cfg_label = cfg_path.string();
    cfg = parse_json(read_file(cfg_path), cfg_label);
    if (!cfg.is_object()) throw Error(Errc::format, cfg_label + ": expected a JSON object");
    check_tokenizer_config_agrees(root, label, cfg, cfg_label);
    if (const std::string diff = transformers_pipeline_difference(root, cfg); !diff.empty()) {
      throw Error(Errc::refused, label + ": " + diff +
                                     ", which gives other ids on some texts; stoke will not pick one: re-save the "
                                     "tokenizer with transformers 5 (save_pretrained writes the pipeline it runs)" +
                                     (fs::exists(model_dir / "sentencepiece.bpe.model")
                                          ? ", or delete tokenizer.json to run sentencepiece.bpe.model"
                                          : ""));
    }
  }

  std::unique_ptr<SubwordModel> model;
  TokenizerKind kind = TokenizerKind::wordpiece;
  int32_t unk = -1;
  if (model_type == "WordPiece") {
    const BertNormalizerOptions norm = parse_normalizer(root, label);
    check_pre_tokenizer(root, label);
    auto wp = parse_wordpiece(*mit, norm, label);
    unk = wp->unk_id();
    model = std::move(wp);
  } else if (model_type == "Unigram" || model_type == "BPE") {
    TextNormalizer normalizer = parse_pipeline_normalizer(root, label);
    PreTokenizer pre = parse_pipeline_pre_tokenizer(root, label);
    auto word_model = parse_word_model(*mit, label);
    kind = model_type == "Unigram" ? TokenizerKind::unigram : TokenizerKind::bpe;
    if (kind == TokenizerKind::unigram) unk = static_cast<const UnigramModel&>(*word_model).unk_id();
    model = std::make_unique<PipelineModel>(std::move(normalizer), std::move(pre), std::move(word_model));
  } else {
    throw Error(Errc::unsupported, label + ": field \"model.type\": \"" +
                                       (model_type.empty() ? std::string("?") : model_type) +
                                       "\" is not supported (supported: WordPiece, Unigram, BPE)");
  }
  std::vector<AddedToken> added = parse_added_tokens(root, label);
  PostProcessor post = parse_post_processor(root, *model, label);
  const int32_t pad = pad_id_of(*model, added, cfg, cfg_label);
  if (unk < 0) {
    for (const char* name : {"<unk>", "[UNK]"})
      if (unk < 0) unk = id_of(*model, added, name);
    if (unk < 0) unk = 0;
  }
  auto tok = std::make_unique<Tokenizer>(kind, std::move(model), AddedTokenMatcher(added), std::move(post), pad, unk);
  tok->source = "tokenizer.json";
  tok->model_max_length = model_max_length(cfg);
  return tok;
}

std::unique_ptr<Tokenizer> load_roberta_bpe_tokenizer(const fs::path& vocab_json, const fs::path& merges_txt,
                                                      const std::string& config_text) {
  const std::string cfg_label = (vocab_json.parent_path() / "tokenizer_config.json").string();
  const json cfg = config_text.empty() ? json::object() : parse_json(config_text, cfg_label);
  if (!cfg.is_object()) throw Error(Errc::format, cfg_label + ": expected a JSON object");
  auto word_model = load_bpe_files(read_file(vocab_json), vocab_json.string(), read_file(merges_txt),
                                   merges_txt.string());
  // RobertaTokenizer: ByteLevel with the config's add_prefix_space (default false), no normalizer.
  PreTokenizerStep step;
  step.kind = PreTokenizerStep::Kind::byte_level;
  step.add_prefix_space = get_bool(cfg, "add_prefix_space", false, cfg_label);
  auto model = std::make_unique<PipelineModel>(TextNormalizer(), PreTokenizer({step}), std::move(word_model));

  std::vector<AddedToken> added;
  auto special = [&](const char* key, const char* fallback, bool lstrip) -> int32_t {
    auto spec = special_spec(cfg, key, cfg_label);
    SpecialSpec s = spec ? *spec : SpecialSpec{fallback};
    const int32_t id = model->token_to_id(s.content);
    if (id < 0) {
      throw Error(Errc::format, vocab_json.string() + ": special token \"" + s.content + "\" (" + key +
                                    ") is not in the vocabulary");
    }
    AddedToken t;
    t.content = s.content;
    t.id = id;
    t.lstrip = s.is_object ? s.lstrip : lstrip;
    t.rstrip = s.is_object && s.rstrip;
    add_unique(added, std::move(t));
    return id;
  };
  const int32_t bos = special("bos_token", "<s>", false);
  const int32_t eos = special("eos_token", "</s>", false);
  special("sep_token", "</s>", false);
  special("cls_token", "<s>", false);
  const int32_t unk = special("unk_token", "<unk>", false);
  const int32_t pad = special("pad_token", "<pad>", false);
  // transformers 5 builds these from plain strings: no lstrip, even on
  // <mask> (its tokenizer.json files say lstrip for <mask>; they are read as written).
  special("mask_token", "<mask>", false);
  add_config_added_tokens(cfg, cfg_label, vocab_json.parent_path(), added);
  // transformers builds RobertaProcessing with trim_offsets (default true)
  // and the config's add_prefix_space.
  PostProcessor post = roberta_template(bos, eos);
  post.trim_offsets = get_bool(cfg, "trim_offsets", true, cfg_label);
  post.trim_add_prefix_space = step.add_prefix_space;
  auto tok = std::make_unique<Tokenizer>(TokenizerKind::bpe, std::move(model), AddedTokenMatcher(added),
                                         std::move(post), pad, unk);
  tok->source = "vocab.json";
  tok->model_max_length = model_max_length(cfg);
  return tok;
}

std::unique_ptr<Tokenizer> load_bert_vocab_tokenizer(const fs::path& vocab_txt, const std::string& config_text) {
  const std::string label = (vocab_txt.parent_path() / "tokenizer_config.json").string();
  const json cfg = config_text.empty() ? json::object() : parse_json(config_text, label);
  if (!cfg.is_object()) throw Error(Errc::format, label + ": expected a JSON object");
  if (!get_bool(cfg, "do_basic_tokenize", true, label)) {
    throw Error(Errc::unsupported, label + ": do_basic_tokenize false is not supported (stoke always runs the "
                                           "BERT pre-tokenizer)");
  }
  BertNormalizerOptions norm;
  norm.lowercase = get_bool(cfg, "do_lower_case", true, label);
  norm.strip_accents = get_optional_bool(cfg, "strip_accents", label);
  norm.handle_chinese_chars = get_bool(cfg, "tokenize_chinese_chars", true, label);
  norm.clean_text = true;
  WordPieceOptions wp;
  auto unk_spec = special_spec(cfg, "unk_token", label);
  wp.unk_token = unk_spec ? unk_spec->content : "[UNK]";
  auto model = std::make_unique<WordPieceModel>(read_vocab_txt(vocab_txt.string()), norm, wp);

  std::vector<AddedToken> added;
  int64_t next_id = model->vocab_size();
  auto special_id = [&](const char* key, const char* fallback) -> int32_t {
    auto spec = special_spec(cfg, key, label);
    SpecialSpec s = spec ? *spec : SpecialSpec{fallback};
    int32_t id = model->token_to_id(s.content);
    // transformers appends a special token missing from vocab.txt after it.
    if (id < 0) {
      for (const auto& t : added)
        if (t.content == s.content) id = t.id;
      if (id < 0) id = static_cast<int32_t>(next_id++);
    }
    add_unique(added, added_from_spec(s, id));
    return id;
  };
  // Registration order follows transformers' SPECIAL_TOKENS_ATTRIBUTES.
  const int32_t unk = special_id("unk_token", "[UNK]");
  const int32_t sep = special_id("sep_token", "[SEP]");
  const int32_t pad = special_id("pad_token", "[PAD]");
  const int32_t cls = special_id("cls_token", "[CLS]");
  special_id("mask_token", "[MASK]");
  if (auto it = cfg.find("additional_special_tokens"); it != cfg.end() && it->is_array()) {
    for (const json& t : *it) {
      SpecialSpec s;
      s.content = t.is_string() ? t.get<std::string>() : get_string(t, "content", "", label);
      if (s.content.empty()) continue;
      int32_t id = model->token_to_id(s.content);
      if (id < 0) id = static_cast<int32_t>(next_id++);
      add_unique(added, added_from_spec(s, id));
    }
  }
  // Tokens added after training: added_tokens_decoder, added_tokens.json.
  add_config_added_tokens(cfg, label, vocab_txt.parent_path(), added);
  auto tok = std::make_unique<Tokenizer>(TokenizerKind::wordpiece, std::move(model), AddedTokenMatcher(added),
                                         bert_template(cls, sep), pad, unk);
  tok->source = "vocab.txt + tokenizer_config.json";
  tok->model_max_length = model_max_length(cfg);
  return tok;
}

std::unique_ptr<Tokenizer> load_xlmr_sentencepiece_tokenizer(const fs::path& spm_model, const std::string& config_text) {
  const std::string label = (spm_model.parent_path() / "tokenizer_config.json").string();
  const json cfg = config_text.empty() ? json::object() : parse_json(config_text, label);
  if (!cfg.is_object()) throw Error(Errc::format, label + ": expected a JSON object");
  auto model = std::make_unique<SentencePieceModel>(spm_model.string());
  const int32_t mask = model->mask_id();

  // The fairseq ids are fixed; the strings come from the config. <mask> eats
  // the whitespace on its left (XLMRobertaTokenizer makes it lstrip=True).
  std::vector<AddedToken> added;
  auto add = [&](const char* key, const char* fallback, int32_t id, bool default_lstrip) {
    auto spec = special_spec(cfg, key, label);
    SpecialSpec s = spec ? *spec : SpecialSpec{fallback};
    if (!spec && default_lstrip) {
      s.is_object = true;
      s.lstrip = true;
    }
    add_unique(added, added_from_spec(s, id));
  };
  add("bos_token", "<s>", SentencePieceModel::kBos, false);
  add("eos_token", "</s>", SentencePieceModel::kEos, false);
  add("unk_token", "<unk>", SentencePieceModel::kUnk, false);
  add("sep_token", "</s>", SentencePieceModel::kEos, false);
  add("pad_token", "<pad>", SentencePieceModel::kPad, false);
  add("cls_token", "<s>", SentencePieceModel::kBos, false);
  add("mask_token", "<mask>", mask, true);
  // Tokens added after training. libsentencepiece normalizes inside, so every
  // added token is matched on the raw text here.
  add_config_added_tokens(cfg, label, spm_model.parent_path(), added);
  for (AddedToken& t : added) t.normalized = false;
  auto tok = std::make_unique<Tokenizer>(TokenizerKind::sentencepiece, std::move(model), AddedTokenMatcher(added),
                                         roberta_template(SentencePieceModel::kBos, SentencePieceModel::kEos),
                                         SentencePieceModel::kPad, SentencePieceModel::kUnk);
  tok->source = "sentencepiece.bpe.model + tokenizer_config.json";
  tok->model_max_length = model_max_length(cfg);
  return tok;
}

namespace {

// A Unigram tokenizer.json whose pipeline transformers 5 would replace, with
// no added token beyond the fairseq specials (<s> <pad> </s> <unk> = 0..3,
// <mask> = the last id), beside sentencepiece.bpe.model.
bool hub_style_unigram_beside_spm(const std::string& tj_text, const std::string& cfg_text, const fs::path& spm) {
  json tj, cfg;
  try {
    tj = json::parse(tj_text);
    cfg = cfg_text.empty() ? json::object() : json::parse(cfg_text);
  } catch (const json::exception&) {
    return false;  // load_tokenizer_json reports it
  }
  if (transformers_pipeline_difference(tj, cfg).empty()) return false;
  const int64_t specials_end = SentencePieceModel(spm.string()).vocab_size();  // pieces + 4 - 1 + <mask>
  if (auto it = tj.find("added_tokens"); it != tj.end() && it->is_array())
    for (const json& t : *it) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer()) return false;
      const int64_t id = t["id"].get<int64_t>();
      if (id > 3 && id != specials_end - 1) return false;
    }
  return true;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const fs::path& dir, const TokenizerLoadOptions& options) {
  auto config_text = [&]() -> std::string {
    const fs::path p = dir / "tokenizer_config.json";
    return fs::exists(p) ? read_file(p) : std::string();
  };
  std::unique_ptr<Tokenizer> tok;
  const fs::path tj = dir / "tokenizer.json";
  const fs::path spm = dir / "sentencepiece.bpe.model";
  const fs::path vocab = dir / "vocab.txt";
  const fs::path vocab_json = dir / "vocab.json";
  const fs::path merges = dir / "merges.txt";
  // tokenizer.json first (DESIGN's precedence): it is the only file that
  // holds tokens added after training, and transformers 5 writes only it.
  if (fs::exists(tj) && fs::exists(spm) && hub_style_unigram_beside_spm(read_file(tj), config_text(), spm)) {
    // An XLM-R folder from before transformers 5 (hub bge-m3, multilingual-e5):
    // its tokenizer.json pipeline is not the one transformers 5 runs (see
    // transformers_pipeline_difference) and holds no token the SentencePiece
    // model lacks, so the SentencePiece model runs, as it always did here.
    tok = load_xlmr_sentencepiece_tokenizer(spm, config_text());
  } else if (fs::exists(tj)) {
    tok = load_tokenizer_json(read_file(tj), tj.string(), dir);
  } else if (fs::exists(vocab)) {
    tok = load_bert_vocab_tokenizer(vocab, config_text());
  } else if (fs::exists(spm)) {
    tok = load_xlmr_sentencepiece_tokenizer(spm, config_text());
  } else if (fs::exists(vocab_json) && fs::exists(merges)) {
    tok = load_roberta_bpe_tokenizer(vocab_json, merges, config_text());
  } else {
    throw Error(Errc::not_found, dir.string() + ": no tokenizer found (expected tokenizer.json, vocab.txt, "
                                                "sentencepiece.bpe.model, or vocab.json with merges.txt)");
  }
  tok->set_lowercase_input(options.lowercase_input);
  return tok;
}

}  // namespace stoke
