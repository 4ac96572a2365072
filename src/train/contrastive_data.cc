#include "train/contrastive_data.h"

#include <cmath>
#include <fstream>
#include <unordered_map>
#include <unordered_set>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/batch_order.h"

namespace stoke::train {

using json = nlohmann::ordered_json;

const char* objective_name(Objective o) {
  switch (o) {
    case Objective::classify: return "classify";
    case Objective::mnrl: return "mnrl";
    case Objective::mnrl_symmetric: return "mnrl-symmetric";
    case Objective::cosent: return "cosent";
    case Objective::cosine_mse: return "cosine-mse";
  }
  return "?";
}

bool objective_takes_scores(Objective o) { return o == Objective::cosent || o == Objective::cosine_mse; }

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 20; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 20) s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s.empty() ? "none" : s;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::vector<std::string> first_record_fields(const RecordReaderOptions& options) {
  const InputFormat format = options.format ? *options.format : input_format_for_path(options.path);
  if (format == InputFormat::text) return {};
  if (format == InputFormat::jsonl) {
    std::ifstream in(options.path);
    if (!in) throw Error(Errc::not_found, options.path + ": cannot open");
    std::string line;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const json doc = json::parse(line, nullptr, false);
      std::vector<std::string> keys;
      if (doc.is_object())
        for (const auto& [k, v] : doc.items()) keys.push_back(k);
      return keys;  // a bad first line: the reader names it
    }
    return {};
  }
  // CSV / TSV: the header line, split (names with quotes lose them; the
  // reader itself parses the header again, exactly, when the records are read).
  std::ifstream in(options.path);
  std::string header;
  std::getline(in, header);
  std::vector<std::string> names;
  const char sep = format == InputFormat::tsv ? '\t' : ',';
  size_t at = 0;
  while (at <= header.size()) {
    const size_t end = std::min(header.find(sep, at), header.size());
    std::string name = header.substr(at, end - at);
    if (!name.empty() && name.back() == '\r') name.pop_back();
    if (name.size() >= 2 && name.front() == '"' && name.back() == '"') name = name.substr(1, name.size() - 2);
    names.push_back(name);
    at = end + 1;
  }
  return names;
}

ContrastiveDataset read_contrastive_dataset(const RecordReaderOptions& base, const ContrastiveColumns& c,
                                            Objective objective, bool skip_bad) {
  if (objective == Objective::classify) throw Error(Errc::internal, "read_contrastive_dataset: a classifier objective");
  const bool scored = objective_takes_scores(objective);
  ContrastiveDataset d;
  const std::string anchor = !c.anchor.empty() ? c.anchor : scored ? "sentence1" : "anchor";
  const std::string positive = !c.positive.empty() ? c.positive : scored ? "sentence2" : "positive";
  d.columns = {anchor, positive};
  const std::vector<std::string> fields = first_record_fields(base);
  if (scored) {
    d.score_column = !c.score.empty() ? c.score : "score";
    if (c.negatives && !c.negatives->empty())
      throw Error(Errc::invalid_argument, std::string("--negative-fields: --objective ") + objective_name(objective) +
                                              " learns from scored pairs; hard negatives are for mnrl and mnrl-symmetric");
  } else if (c.negatives) {
    for (const std::string& n : *c.negatives) d.columns.push_back(n);
  } else {
    for (const std::string& f : fields)
      if (starts_with(f, "negative")) d.columns.push_back(f);
  }
  // The objective's columns against the file's, before any record is read.
  std::vector<std::string> need = d.columns;
  if (scored) need.push_back(d.score_column);
  std::vector<std::string> missing;
  for (const std::string& n : need)
    if (std::find(fields.begin(), fields.end(), n) == fields.end()) missing.push_back(n);
  if (!fields.empty() && !missing.empty())
    throw Error(Errc::invalid_argument,
                base.path + ": --objective " + objective_name(objective) + " needs the columns " + joined(need) +
                    " (missing: " + joined(missing) + "); the file's first record has " + joined(fields) +
                    (scored ? " (scored pairs: rename with --anchor-field, --positive-field, --score-field)"
                            : " (pairs or triplets: rename with --anchor-field, --positive-field, --negative-fields;"
                              " scored pairs train with --objective cosent or cosine-mse)"));

  RecordReaderOptions o = base;
  o.text_field = anchor;
  o.pair_field.clear();
  o.id_field.clear();
  o.label_field = scored ? d.score_column : "";
  o.more_fields.assign(d.columns.begin() + 1, d.columns.end());
  RecordReader reader(o);
  d.path = reader.label();
  std::unordered_map<std::string, uint32_t> index;
  auto text_index = [&](std::string&& t) {
    auto [it, fresh] = index.emplace(std::move(t), static_cast<uint32_t>(d.texts.size()));
    if (fresh) d.texts.push_back(it->first);
    return it->second;
  };
  InputRecord rec;
  while (reader.next(rec)) {
    std::string error = rec.error;
    float score = 0;
    if (error.empty() && scored) {
      const nlohmann::json v = nlohmann::json::parse(rec.label_json, nullptr, false);
      if (!v.is_number() || !std::isfinite(v.get<double>()))
        error = "field \"" + d.score_column + "\" (the pair's score): expected a finite number, found " + rec.label_json;
      else
        score = static_cast<float>(v.get<double>());
    }
    if (!error.empty()) {
      if (!skip_bad)
        throw Error(Errc::format, d.path + ":" + std::to_string(rec.line) + ": record " + std::to_string(rec.index) +
                                      ": " + error + " (--on-error skip skips bad records)");
      rec.error = error;
      d.bad.push_back(rec);
      continue;
    }
    d.replaced_utf8 += rec.replaced_utf8;
    ContrastiveExample e;
    e.record = rec.index;
    e.score = score;
    e.texts.push_back(text_index(std::move(rec.text)));
    for (std::string& t : rec.more) e.texts.push_back(text_index(std::move(t)));
    d.examples.push_back(std::move(e));
  }
  d.sha256 = reader.sha256_so_far();
  if (d.examples.empty())
    throw Error(Errc::invalid_argument, d.path + ": no training records" +
                                            (d.bad.empty() ? std::string() : " (every record was bad and skipped)"));
  return d;
}

std::vector<Example> tokenize_texts(const std::vector<std::string>& texts, const Tokenizer& tokenizer,
                                    const EncodeOptions& encode, ThreadPool* pool, TokenizeStats* stats) {
  std::vector<TextInput> inputs;
  inputs.reserve(texts.size());
  for (const std::string& t : texts) inputs.push_back(TextInput{t, std::nullopt});
  std::vector<Encoding> enc = tokenizer.encode_batch(inputs, encode, pool);
  std::vector<Example> out(enc.size());
  for (size_t i = 0; i < enc.size(); ++i) {
    if (stats) {
      stats->tokens += enc[i].ids.size();
      stats->truncated += enc[i].truncated ? 1 : 0;
    }
    out[i].ids = std::move(enc[i].ids);
    out[i].type_ids = std::move(enc[i].type_ids);
    out[i].record = i;
  }
  return out;
}

std::vector<std::vector<uint32_t>> no_duplicate_batches(const ContrastiveDataset& data, int64_t batch_size,
                                                        bool shuffle, uint64_t seed, int64_t epoch) {
  if (batch_size <= 0) throw Error(Errc::invalid_argument, "batch size must be positive");
  const size_t n = data.examples.size();
  std::vector<uint32_t> left = shuffle ? seeded_permutation(n, seed, epoch) : std::vector<uint32_t>(n);
  if (!shuffle)
    for (size_t i = 0; i < n; ++i) left[i] = static_cast<uint32_t>(i);
  std::vector<std::vector<uint32_t>> batches;
  std::unordered_set<uint32_t> in_batch;
  std::vector<uint32_t> rest;
  // Each pass takes one batch from the front of what is left; the examples it
  // skipped keep their order for the next.
  size_t begin = 0;
  while (begin < left.size()) {
    std::vector<uint32_t> batch;
    in_batch.clear();
    rest.clear();
    size_t i = begin;
    for (; i < left.size() && static_cast<int64_t>(batch.size()) < batch_size; ++i) {
      const ContrastiveExample& e = data.examples[left[i]];
      bool clash = false;
      for (uint32_t t : e.texts) clash = clash || in_batch.count(t) > 0;
      if (clash) {
        rest.push_back(left[i]);
        continue;
      }
      batch.push_back(left[i]);
      in_batch.insert(e.texts.begin(), e.texts.end());
    }
    // left[begin, i) is used up: the skipped ones go back in front of the rest.
    std::copy(rest.begin(), rest.end(), left.begin() + static_cast<long>(i - rest.size()));
    begin = i - rest.size();
    batches.push_back(std::move(batch));
  }
  return batches;
}

}  // namespace stoke::train
