#include "train/train_data.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace stoke::train {

namespace {

using nlohmann::json;

std::string where(const RawDataset& d, uint64_t line) { return d.path + ":" + std::to_string(line); }

// A label's JSON as written: an integer id, a name, or a (regression) number.
std::optional<RawLabel> parse_label(const std::string& text, std::string* error) {
  const json v = json::parse(text, nullptr, false);
  RawLabel l;
  if (v.is_number_integer() || v.is_number_unsigned()) {
    l.kind = RawLabel::id;
    l.id_value = v.get<int64_t>();
    l.number_value = static_cast<double>(l.id_value);
    return l;
  }
  if (v.is_number_float()) {
    l.kind = RawLabel::number;
    l.number_value = v.get<double>();
    if (!std::isfinite(l.number_value)) {
      *error = "expected a finite number";
      return std::nullopt;
    }
    return l;
  }
  if (v.is_string()) {
    l.kind = RawLabel::name;
    l.name_value = v.get<std::string>();
    return l;
  }
  *error = std::string("expected an integer class id, a label name or a number, found ") + v.type_name();
  return std::nullopt;
}

bool is_regression(const HfConfig& c) {
  return c.problem_type == ProblemType::regression ||
         (c.num_labels() == 1 && c.problem_type == ProblemType::unspecified);
}

}  // namespace

RawDataset read_raw_dataset(const RecordReaderOptions& options, bool skip_bad) {
  if (options.label_field.empty()) throw Error(Errc::internal, "training data needs a label field");
  RecordReader reader(options);
  RawDataset d;
  d.path = reader.label();
  InputRecord rec;
  while (reader.next(rec)) {
    std::string error = rec.error;
    std::optional<RawLabel> label;
    if (error.empty()) {
      std::string why;
      label = parse_label(rec.label_json, &why);
      if (!label) error = "field \"" + options.label_field + "\" (--label-field): " + why;
    }
    if (!error.empty()) {
      if (!skip_bad)
        throw Error(Errc::format, where(d, rec.line) + ": record " + std::to_string(rec.index) + ": " + error +
                                      " (--on-error skip skips bad records)");
      rec.error = error;
      d.bad.push_back(rec);
      continue;
    }
    d.replaced_utf8 += rec.replaced_utf8;
    RawExample ex;
    ex.text = std::move(rec.text);
    ex.pair = std::move(rec.pair);
    ex.label = *label;
    ex.record = rec.index;
    ex.line = rec.line;
    d.examples.push_back(std::move(ex));
  }
  d.sha256 = reader.sha256_so_far();
  if (d.examples.empty()) throw Error(Errc::invalid_argument, d.path + ": no training examples");
  return d;
}

bool has_real_label_names(const HfConfig& config) {
  for (size_t i = 0; i < config.id2label.size(); ++i)
    if (config.id2label[i] != "LABEL_" + std::to_string(i)) return true;
  return false;
}

LabelSpace resolve_labels(const HfConfig& config, const RawDataset& train, int64_t num_labels_flag, bool new_labels) {
  LabelSpace s;
  const int64_t C = config.num_labels();
  if (is_regression(config) && num_labels_flag <= 0) {
    s.regression = true;
    s.id2label = config.id2label.empty() ? std::vector<std::string>{"LABEL_0"} : config.id2label;
    for (const RawExample& e : train.examples)
      if (e.label.kind == RawLabel::name)
        throw Error(Errc::format, where(train, e.line) + ": label \"" + e.label.name_value +
                                      "\" is a name, but the model is a regression model (one output): expected a "
                                      "number");
    return s;
  }
  bool any_id = false, any_name = false;
  for (const RawExample& e : train.examples) {
    if (e.label.kind == RawLabel::number)
      throw Error(Errc::format, where(train, e.line) + ": label " + std::to_string(e.label.number_value) +
                                    " is not an integer class id (a classification model with " +
                                    std::to_string(C) + " labels)");
    (e.label.kind == RawLabel::id ? any_id : any_name) = true;
  }
  if (any_id && any_name) {
    for (const RawExample& e : train.examples)
      if (e.label.kind == RawLabel::name)
        throw Error(Errc::format, where(train, e.line) + ": label \"" + e.label.name_value +
                                      "\" is a name, but other records use integer ids: use one kind throughout");
  }
  if (any_id) {
    const int64_t n = num_labels_flag > 0 ? num_labels_flag : C;
    for (const RawExample& e : train.examples)
      if (e.label.id_value < 0 || e.label.id_value >= n)
        throw Error(Errc::invalid_argument,
                    where(train, e.line) + ": label " + std::to_string(e.label.id_value) + " is outside [0, " +
                        std::to_string(n) + "): the model has " + std::to_string(n) +
                        " labels (--num-labels N trains a new head with N)");
    if (n == C) {
      s.id2label = config.id2label;
      return s;
    }
    for (int64_t i = 0; i < n; ++i) s.id2label.push_back("LABEL_" + std::to_string(i));
  } else {
    bool all_known = true;
    std::set<std::string> names;
    for (const RawExample& e : train.examples) {
      names.insert(e.label.name_value);
      if (!config.label2id.count(e.label.name_value)) all_known = false;
    }
    if (all_known && (num_labels_flag <= 0 || num_labels_flag == C)) {
      s.id2label = config.id2label;
      return s;
    }
    // A fine-tuned head meeting an unknown name: a typo or another dataset,
    // never a reason to silently discard the head and renumber its labels.
    if (!all_known && has_real_label_names(config) && !new_labels) {
      std::string known;
      for (size_t i = 0; i < config.id2label.size() && i < 12; ++i) known += (i ? ", " : "") + config.id2label[i];
      if (config.id2label.size() > 12) known += ", ...";
      for (const RawExample& e : train.examples)
        if (!config.label2id.count(e.label.name_value))
          throw Error(Errc::invalid_argument, where(train, e.line) + ": label \"" + e.label.name_value +
                                                  "\" is not one of the model's labels (" + known +
                                                  "); --new-labels trains a new head on the data's labels instead");
    }
    s.id2label.assign(names.begin(), names.end());
    if (num_labels_flag > 0 && num_labels_flag != static_cast<int64_t>(names.size()))
      throw Error(Errc::invalid_argument, "--num-labels " + std::to_string(num_labels_flag) + " but the training data has " +
                                              std::to_string(names.size()) + " label names");
  }
  if (s.id2label.size() < 2)
    throw Error(Errc::invalid_argument, train.path + ": every example has the label \"" + s.id2label[0] +
                                            "\": a classifier needs at least two labels");
  s.changed = true;
  s.reinit_head = static_cast<int64_t>(s.id2label.size()) != C;
  std::string list;
  for (size_t i = 0; i < s.id2label.size() && i < 12; ++i) list += (i ? ", " : "") + s.id2label[i];
  if (s.id2label.size() > 12) list += ", ...";
  s.notice = "labels: " + std::to_string(s.id2label.size()) + " (" + list + ") instead of the model's " +
             std::to_string(C) + (s.reinit_head ? "; the classification head is initialised afresh" : "") +
             "; the new id2label/label2id are saved with the model";
  if (has_real_label_names(config))
    s.notice = "WARNING: --new-labels replaces this fine-tuned model's labels: " + s.notice +
               " (its old labels no longer mean anything)";
  return s;
}

std::vector<Example> make_examples(const RawDataset& raw, const LabelSpace& labels, const Tokenizer& tokenizer,
                                   const EncodeOptions& encode, ThreadPool* pool, TokenizeStats* stats) {
  std::map<std::string, int32_t> by_name;
  for (size_t i = 0; i < labels.id2label.size(); ++i) by_name[labels.id2label[i]] = static_cast<int32_t>(i);
  std::vector<Example> out(raw.examples.size());
  const int64_t C = static_cast<int64_t>(labels.id2label.size());
  for (size_t i = 0; i < raw.examples.size(); ++i) {
    const RawExample& e = raw.examples[i];
    Example& x = out[i];
    x.record = e.record;
    if (labels.regression) {
      if (e.label.kind == RawLabel::name)
        throw Error(Errc::format, where(raw, e.line) + ": label \"" + e.label.name_value + "\": expected a number");
      x.target = static_cast<float>(e.label.number_value);
      continue;
    }
    switch (e.label.kind) {
      case RawLabel::id:
        if (e.label.id_value < 0 || e.label.id_value >= C)
          throw Error(Errc::invalid_argument, where(raw, e.line) + ": label " + std::to_string(e.label.id_value) +
                                                  " is outside [0, " + std::to_string(C) + ")");
        x.label = static_cast<int32_t>(e.label.id_value);
        break;
      case RawLabel::name: {
        auto it = by_name.find(e.label.name_value);
        if (it == by_name.end())
          throw Error(Errc::invalid_argument, where(raw, e.line) + ": label \"" + e.label.name_value +
                                                  "\" is not one of the model's labels");
        x.label = it->second;
        break;
      }
      case RawLabel::number:
        throw Error(Errc::format, where(raw, e.line) + ": label " + std::to_string(e.label.number_value) +
                                      " is not an integer class id");
    }
  }
  std::vector<TextInput> inputs;
  inputs.reserve(raw.examples.size());
  for (const RawExample& e : raw.examples)
    inputs.push_back(TextInput{e.text, e.pair ? std::optional<std::string_view>(*e.pair) : std::nullopt});
  std::vector<Encoding> enc = tokenizer.encode_batch(inputs, encode, pool);
  for (size_t i = 0; i < enc.size(); ++i) {
    if (stats) {
      stats->tokens += enc[i].ids.size();
      stats->truncated += enc[i].truncated ? 1 : 0;
    }
    out[i].ids = std::move(enc[i].ids);
    out[i].type_ids = std::move(enc[i].type_ids);
  }
  return out;
}

}  // namespace stoke::train
