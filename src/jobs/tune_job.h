// `stoke tune embed`: short trials changing one knob at a time, in the order a
// careful practitioner tunes by hand — tokenizer workers, then the token
// budget (doubling up to the memory limit, then one step down), then the
// precisions --try-precisions names (none unless named: every other precision
// changes every vector, and each one tried has its vectors compared with
// f32's, so speed never silently costs quality or moves the vector space);
// graphs when on CUDA. Each change is raced against the current best,
// alternately and at least 3 runs each, and taken only when faster beyond the
// run-to-run spread (tune_significance.h). Prints the trial table and the
// winning settings, as a `--config FILE` that embed accepts; writes that file
// only where --write-config names it.
//
// Stopping (SIGTERM/SIGINT, core/stop_request.h): no trial starts after the
// stop is asked for, an embed trial in flight stops between batches and does
// not count; the table shows the trials completed, marked interrupted, and the
// settings are the best of those — written as asked only when the starting
// point's trial completed. The result says interrupted; the CLI exits with
// the stop's status.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "core/stop_request.h"
#include "jobs/embed_job.h"
#include "jobs/option_table.h"
#include "jobs/train_job.h"

namespace stoke {

struct TuneOptions {
  EmbedOptions embed;               // the job's flags: the starting point
  double seconds_per_trial = 5;     // --seconds-per-trial
  std::string write_config;         // --write-config FILE (empty: the settings are printed, no file written)
  double min_cosine = 0.999;        // --min-cosine: a precision is taken only if every embedding stays this close to f32's
  int64_t max_workers = 0;          // --max-workers (0: the cores)
  double min_centered_cosine = 0.99;  // --min-centered-cosine: another precision is taken only if its mean centered cosine to f32's reaches this
  // --try-precisions: precisions besides the starting one (--precision) that
  // tune may race, as words (jobs/precision.h: f32, bf16, f16, int8; the
  // table's entry checks them as given, run_tune again before any trial, for
  // callers that set them here). Empty: the starting one is kept.
  std::vector<std::string> try_precisions;
  // What asks tune to stop: checked before every trial, and each embed trial's
  // EmbedOptions::cancel. The process's stop flag unless a test gives its own.
  const std::atomic<bool>* cancel = &stop_requested_flag();
  std::function<void()> after_trial;  // tests: called after every completed trial (to stop at a known point)
};

struct TuneTrial {
  std::string knob, value;
  double texts_per_second = 0, tokens_per_second = 0, device_busy = 0;
  std::string note;                 // "best", quality figures, why skipped
  bool chosen = false;
};

struct TuneResult {
  std::vector<TuneTrial> trials;
  std::string config_json;          // the settings (written only where --write-config asks)
  std::string table;                // what the terminal shows
  double speedup = 1;               // product of the taken changes' measured ratios (1: nothing changed)
  // A stop request ended the search: the trials are those completed, and
  // config_json is the best of them ("" when the starting point's trial did
  // not complete: then nothing was written).
  bool interrupted = false;
};

TuneResult run_tune(const TuneOptions& options);

// `stoke tune embed`'s own options (jobs/tune_option_table.cc): the CLI adds
// them after embed's (its output options left out), and --config reads them
// through the same entries. Not offered to Python.
const OptionTable<TuneOptions>& tune_option_table();

// `stoke tune train`: the batch size (doubled while it helps and fits, with
// the linear LR scaling rule from the starting batch: --lr-scale-from), then
// precision (bf16 where native, with the training loss after the trial's
// steps compared to f32's on the same batches and dropout masks).
struct TuneTrainOptions {
  TrainOptions train;               // the job's flags: the starting point
  int64_t steps_per_trial = 20;     // --steps-per-trial
  std::string write_config;         // as TuneOptions::write_config
  double max_loss_change = 0.02;    // --max-loss-change: bf16 is taken only if its loss stays this close (relative)
  // As TuneOptions: checked before every trial (a training trial in flight
  // runs to its end: it is short), and the tests' hook.
  const std::atomic<bool>* cancel = &stop_requested_flag();
  std::function<void()> after_trial;
};

TuneResult run_tune_train(const TuneTrainOptions& options);

// `stoke tune train`'s own options, as tune_option_table() for embed.
const OptionTable<TuneTrainOptions>& tune_train_option_table();

}  // namespace stoke
