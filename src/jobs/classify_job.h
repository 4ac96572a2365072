// `stoke classify`: a sequence classifier's output for every input record, in
// input order, one JSON line each:
//   single label (softmax):   {"logits": [...], "label": "<name>", "score": p}
//   multi-label (sigmoid):    {"logits": [...], "labels": [names with p > 0.5], "scores": [p per label]}
//   regression (one logit):   {"logits": [x], "score": x}
// problem_type in config.json decides; without one, one label means a sigmoid
// score (cross-encoders, as sentence-transformers' CrossEncoder does) and
// several mean softmax. Pairs (--pair-field) make a cross-encoder / reranker.
#pragma once

#include <atomic>

#include <optional>
#include <string>
#include <vector>

#include "jobs/common_options.h"
#include "jobs/int8_quality.h"

namespace stoke {

struct ClassifyOptions {
  CommonOptions common;
  std::string output = "-";
  int64_t max_batch_size = 256;
  bool skip_bad_records = false;  // --on-error skip (stop: the default)
  std::string errors;             // --errors FILE (jobs/skipped_records.h)
  // Set by the CLI (core/stop_request.h): a stop ends the run between
  // batches; the output then holds the rows of a prefix of the input.
  const std::atomic<bool>* cancel = nullptr;
};

struct ClassifySummary {
  uint64_t records = 0, pairs = 0, tokens = 0, truncated = 0, batches = 0, host_syncs = 0;
  uint64_t read = 0;        // input records, bad ones included
  uint64_t skipped = 0;     // bad records skipped under --on-error skip (no output line)
  std::string errors_file;  // where they went
  std::string mode, device;
  double seconds = 0;
  std::vector<std::string> notes;  // what the run adapted (a token budget halved for memory)
  std::string gpu_report;  // "gpu: util ..." (jobs/gpu_usage.h); "" when not sampled
  std::optional<ClassifyQuality> quality;  // --precision int8: labels and logits against f32 on the first texts
  bool cancelled = false;   // a stop ended it: the output holds the first `read` records' lines
};

// classify's options, declared once (jobs/option_table.h): the common options
// it takes, then its own. The CLI and --config read it.
const OptionTable<ClassifyOptions>& classify_option_table();

ClassifySummary run_classify(const ClassifyOptions& options);

}  // namespace stoke
