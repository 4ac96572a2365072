// The flags of the jobs that read texts, as each command lists them: the
// common flags (DESIGN conventions), and embed's and train's own, shared by
// `stoke embed`/`train` and their `doctor` and `tune` forms.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "apps/stoke/option_flags.h"
#include "jobs/common_options.h"
#include "jobs/embed_job.h"
#include "jobs/train_job.h"

namespace stoke::cli {

// Every CLI entry of a job's table (tokenize, classify, serve: the common
// options they take are in their tables already; tune's own options).
template <class O>
void add_table_flags(CLI::App* cmd, O& o, const OptionTable<O>& table) {
  for (const Option<O>& e : table)
    if (e.offer & kOfferCli) add_table_option(cmd, o, e);
}

// The CLI entries of `table` that a form of a command takes (job_takes):
// doctor's own options under `doctor`, `doctor embed` or `doctor train`.
template <class O>
void add_table_flags(CLI::App* cmd, O& o, const OptionTable<O>& table, unsigned form) {
  for (const Option<O>& e : table)
    if ((e.offer & kOfferCli) && job_takes(e, form)) add_table_option(cmd, o, e);
}

// `stoke embed`'s flags (also under `stoke doctor embed` and `stoke tune
// embed`), from embed_option_table().
struct EmbedCli {
  EmbedOptions o;
  void finish() {
    if (o.common.inputs.size() == 1) o.common.input = o.common.inputs[0];
  }
};

// output_help: what --output means under this command (required for embed
// itself; optional under doctor); nullptr: no output flags at all (tune
// writes its trials to temporary folders).
void add_embed_flags(CLI::App* embed, EmbedCli& cli, const char* output_help);

// `stoke train`'s flags (also under `stoke doctor train` and `stoke tune
// train`), from train_option_table().
struct TrainCli {
  TrainOptions o;
  // --resume [CHECKPOINT]: the parser stores the optional value here; its
  // table entry's set() takes it once parsing is done (finish).
  std::string resume;
  void finish(CLI::App* cmd) {
    if (const CLI::Option* r = cmd->get_option_no_throw("--resume"); r && r->count() > 0)  // tune has none
      find_option(train_option_table(), "--resume")->set(o, resume);
  }
};

// output_help as for add_embed_flags.
void add_train_flags(CLI::App* train, TrainCli& cli, const char* output_help);

}  // namespace stoke::cli
