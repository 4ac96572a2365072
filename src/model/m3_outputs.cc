#include "model/m3_outputs.h"

#include <algorithm>
#include <optional>
#include <string>

#include "core/error.h"
#include "io/model_folder_error.h"

namespace stoke {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kUnusedKeys[] = {"cls_token", "eos_token", "pad_token", "unk_token"};

json read_object(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return json::object();
  json j = parse_json_strict(read_json_text(file), file.string());
  if (!j.is_object()) throw Error(Errc::format, file.string() + ": expected a JSON object");
  return j;
}

// The class default of a key transformers 4 would use when no file sets it.
std::optional<std::string> class_default(const std::string& tokenizer_class, const std::string& key) {
  if (tokenizer_class.rfind("XLMRoberta", 0) == 0) {
    if (key == "cls_token") return "<s>";
    if (key == "eos_token") return "</s>";
    if (key == "pad_token") return "<pad>";
    if (key == "unk_token") return "<unk>";
  }
  if (tokenizer_class.rfind("Bert", 0) == 0) {
    if (key == "cls_token") return "[CLS]";
    if (key == "pad_token") return "[PAD]";
    if (key == "unk_token") return "[UNK]";
  }
  return std::nullopt;
}

// A special-token entry: "<s>", {"content": "<s>", ...}, or null (unset).
std::optional<std::string> token_content(const json& v, const std::string& label, const std::string& key) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  throw Error(Errc::format, label + ": field \"" + key + "\": expected a string or an object with \"content\"");
}

}  // namespace

std::vector<int32_t> m3_unused_token_ids(const fs::path& folder, const Tokenizer& tokenizer) {
  const fs::path cfg_file = folder / "tokenizer_config.json", map_file = folder / "special_tokens_map.json";
  const json cfg = read_object(cfg_file);
  // transformers 4's _from_pretrained reads special_tokens_map.json only on the
  // legacy path (a config without added_tokens_decoder), where its entries win.
  const json map = cfg.contains("added_tokens_decoder") ? json::object() : read_object(map_file);
  std::string cls_name;
  if (cfg.contains("tokenizer_class") && cfg["tokenizer_class"].is_string()) {
    cls_name = cfg["tokenizer_class"].get<std::string>();
  } else {
    const json model_cfg = read_object(folder / "config.json");
    const std::string type = model_cfg.value("model_type", std::string());
    cls_name = type == "xlm-roberta" ? "XLMRobertaTokenizer" : type == "bert" ? "BertTokenizer" : "";
  }
  std::vector<int32_t> ids;
  for (const char* key : kUnusedKeys) {
    std::optional<std::string> content;
    if (map.contains(key)) content = token_content(map[key], map_file.string(), key);
    else if (cfg.contains(key)) content = token_content(cfg[key], cfg_file.string(), key);
    else content = class_default(cls_name, key);
    if (!content) continue;
    const int32_t id = tokenizer.token_to_id(*content);
    ids.push_back(id >= 0 ? id : tokenizer.unk_id());
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

LexicalWeights lexical_weights(std::span<const int32_t> token_ids, std::span<const float> token_weights,
                               std::span<const int32_t> unused_ids) {
  if (token_ids.size() != token_weights.size())
    throw Error(Errc::internal, "lexical weights: " + std::to_string(token_ids.size()) + " ids but " +
                                    std::to_string(token_weights.size()) + " weights");
  // (id, weight) of the kept tokens, then the max per id: sorting by id puts
  // a text's repeats side by side (a text has at most a few thousand tokens).
  std::vector<std::pair<int32_t, float>> kept;
  kept.reserve(token_ids.size());
  for (size_t t = 0; t < token_ids.size(); ++t) {
    const float w = token_weights[t];
    if (!(w > 0)) continue;  // ReLU's zeros (and a NaN) are not weights: FlagEmbedding's `w > 0`
    if (std::binary_search(unused_ids.begin(), unused_ids.end(), token_ids[t])) continue;
    kept.emplace_back(token_ids[t], w);
  }
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  LexicalWeights out;
  for (const auto& [id, w] : kept) {
    if (!out.ids.empty() && out.ids.back() == id) {
      out.weights.back() = std::max(out.weights.back(), w);
    } else {
      out.ids.push_back(id);
      out.weights.push_back(w);
    }
  }
  return out;
}

std::vector<LexicalWeights> batch_lexical_weights(const PackedBatch& batch, std::span<const float> sparse_weights,
                                                  std::span<const int32_t> unused_ids) {
  if (static_cast<int64_t>(sparse_weights.size()) < batch.tokens())
    throw Error(Errc::internal, "lexical weights: fewer token weights than the batch's tokens");
  std::vector<LexicalWeights> rows;
  rows.reserve(static_cast<size_t>(batch.sequences()));
  for (int64_t b = 0; b < batch.sequences(); ++b) {
    const size_t first = static_cast<size_t>(batch.cu_seqlens[static_cast<size_t>(b)]);
    const size_t end = static_cast<size_t>(batch.cu_seqlens[static_cast<size_t>(b) + 1]);
    rows.push_back(lexical_weights(std::span(batch.ids).subspan(first, end - first),
                                   sparse_weights.subspan(first, end - first), unused_ids));
  }
  return rows;
}

TokenRows colbert_rows(const PackedBatch& batch, int64_t b) {
  if (b < 0 || b >= batch.sequences()) throw Error(Errc::internal, "colbert rows: no sequence " + std::to_string(b));
  const int64_t first = batch.cu_seqlens[static_cast<size_t>(b)];
  const int64_t n = batch.cu_seqlens[static_cast<size_t>(b) + 1] - first;
  return n > 0 ? TokenRows{first + 1, n - 1} : TokenRows{first, 0};
}

std::span<const float> colbert_vectors(const PackedBatch& batch, int64_t b, std::span<const float> colbert,
                                       int64_t dim) {
  const TokenRows r = colbert_rows(batch, b);
  if (static_cast<int64_t>(colbert.size()) < batch.tokens() * dim)
    throw Error(Errc::internal, "colbert vectors: the output holds fewer than the batch's tokens");
  return colbert.subspan(static_cast<size_t>(r.first * dim), static_cast<size_t>(r.count * dim));
}

}  // namespace stoke
