// Labelled examples for fine-tuning: records read by the pipeline's reader
// (JSONL / CSV / TSV with a text, an optional pair and a label), labels
// resolved to class ids by the DESIGN rules, texts tokenized on the tokenizer
// pool once, up front (an epoch reads them again and again; tokenizing once is
// what HF datasets' map does too).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/hf_config.h"
#include "pipeline/record_reader.h"
#include "text/tokenizer.h"

namespace stoke::train {

struct Example {
  std::vector<int32_t> ids, type_ids;
  int32_t label = 0;     // class id (classification)
  float target = 0.0f;   // regression target (one-logit head)
  uint64_t record = 0;   // record number in its file
};

// A label as one record wrote it: an integer id, a name, or a number.
struct RawLabel {
  enum Kind { id, name, number } kind = id;
  int64_t id_value = 0;
  std::string name_value;
  double number_value = 0;
};

struct RawExample {
  std::string text;
  std::optional<std::string> pair;
  RawLabel label;
  uint64_t record = 0, line = 0;
};

struct RawDataset {
  std::string path;
  std::vector<RawExample> examples;
  std::vector<InputRecord> bad;  // skipped bad records (--on-error skip)
  uint64_t replaced_utf8 = 0;
  std::string sha256;            // of the whole file
};

// Reads every record. A bad record (invalid JSON/CSV, missing text or label,
// a label that is not an integer, string or number) throws Error(format)
// naming file:line and the field, unless skip_bad, which collects it.
RawDataset read_raw_dataset(const RecordReaderOptions& options, bool skip_bad);

// How labels map to the classifier's outputs.
struct LabelSpace {
  std::vector<std::string> id2label;  // size = number of outputs (1 for regression)
  bool regression = false;
  bool changed = false;      // differs from the model's config.json (saved with the model)
  bool reinit_head = false;  // the output count differs: the head is drawn fresh
  std::string notice;        // what changed, in one sentence ("" when nothing did)
};

// The DESIGN rules: integer labels are ids (in [0, num_labels)); string labels
// map through config.label2id when every name is there, otherwise the names
// are sorted into a new mapping; a regression config (one label, or
// problem_type regression) takes numbers as targets. num_labels_flag (> 0)
// asks for that many outputs (integer labels; names LABEL_0..), re-initialising
// the head when it differs. A model with real label names (an already
// fine-tuned classifier: not absent, not only the default LABEL_i) keeps them:
// a name outside them is an error unless new_labels (--new-labels), which
// rebuilds the mapping and says so loudly. Throws Error(invalid_argument /
// format) naming file:line for a label out of range or of the wrong kind.
LabelSpace resolve_labels(const HfConfig& config, const RawDataset& train, int64_t num_labels_flag,
                          bool new_labels = false);

// True when config's labels are names someone chose, not absent or LABEL_0..
bool has_real_label_names(const HfConfig& config);

struct TokenizeStats {
  uint64_t tokens = 0, truncated = 0;
};

// Tokenizes and assigns labels (for eval data too: a name the label space does
// not know is an error naming file:line).
std::vector<Example> make_examples(const RawDataset& raw, const LabelSpace& labels, const Tokenizer& tokenizer,
                                   const EncodeOptions& encode, ThreadPool* pool, TokenizeStats* stats);

}  // namespace stoke::train
