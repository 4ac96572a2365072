// The flags of the jobs that read texts, as each command lists them: the
// common flags (DESIGN conventions), and embed's and train's own, shared by
// `stoke embed`/`train` and their `doctor` and `tune` forms.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "jobs/common_options.h"
#include "jobs/embed_job.h"
#include "jobs/train_job.h"

namespace stoke::cli {

constexpr int64_t kMaxTasks = 1'000'000;        // --num-shards: a job array larger than any scheduler runs
constexpr int64_t kMaxSteps = 1'000'000'000;    // train's step counts

// --on-error and --errors of the jobs that write one output file (tokenize,
// classify): a skipped record's number and reason go to the errors file.
void add_on_error_flags(CLI::App* cmd, std::string& on_error, std::string& errors);

// The flags every job that reads texts shares (DESIGN conventions) — only
// those the job uses: a job neither lists nor accepts a flag it ignores.
enum CommonFlag : unsigned {
  kInput = 1,         // --input (train reads --train, with --input as its alias)
  kPairField = 2,     // embed never reads pairs
  kIdField = 4,       // train has no ids
  kDevice = 8,        // --device and --precision (tokenize runs no model)
  kBatchTokens = 16,  // the pipeline's token budget (embed, classify)
  kWorkers = 32,      // tokenizer threads
  kManyInputs = 64,   // --input takes several files, folders and patterns (embed)
};
constexpr unsigned kTokenizeFlags = kInput | kPairField | kIdField | kWorkers;
constexpr unsigned kEmbedFlags = kInput | kManyInputs | kIdField | kDevice | kBatchTokens | kWorkers;
constexpr unsigned kClassifyFlags = kInput | kPairField | kIdField | kDevice | kBatchTokens | kWorkers;
constexpr unsigned kTrainFlags = kPairField | kDevice | kWorkers;

void add_common_flags(CLI::App* cmd, CommonOptions& o, unsigned use);

// `stoke embed`'s flags (also under `stoke doctor embed` and `stoke tune embed`).
struct EmbedCli {
  EmbedOptions o;
  bool normalize = false, no_normalize = false;
  void finish() {
    if (o.common.inputs.size() == 1) o.common.input = o.common.inputs[0];
    if (normalize) o.normalize = true;
    if (no_normalize) o.normalize = false;
  }
};

// output_help: what --output means under this command (required for embed
// itself; optional under doctor); nullptr: no output flags at all (tune
// writes its trials to temporary folders).
void add_embed_flags(CLI::App* embed, EmbedCli& cli, const char* output_help);

// `stoke train`'s flags (also under `stoke doctor train`).
struct TrainCli {
  TrainOptions o;
  double dropout = -1;
  std::string resume;
  void finish(CLI::App* cmd) {
    if (const CLI::Option* r = cmd->get_option_no_throw("--resume"); r && r->count() > 0) {  // tune has none
      o.resume = true;
      o.resume_from = resume;
    }
    if (cmd->count("--dropout") > 0) o.dropout = dropout;
  }
};

// output_help as for add_embed_flags.
void add_train_flags(CLI::App* train, TrainCli& cli, const char* output_help);

}  // namespace stoke::cli
