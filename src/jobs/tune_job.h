// `stoke tune embed`: short trials changing one knob at a time, in the order a
// careful practitioner tunes by hand — tokenizer workers, then the token
// budget (doubling up to the memory limit, then one step down), then
// precision (with the embeddings' difference from f32 reported, so speed never
// silently costs quality); graphs when on CUDA. Each change is raced against
// the current best, alternately and at least 3 runs each, and taken only when
// faster beyond the run-to-run spread (tune_significance.h). Prints the trial
// table and the winning settings, as a `--config FILE` that embed accepts;
// writes that file only where --write-config names it.
#pragma once

#include <string>
#include <vector>

#include "jobs/embed_job.h"
#include "jobs/train_job.h"

namespace stoke {

struct TuneOptions {
  EmbedOptions embed;               // the job's flags: the starting point
  double seconds_per_trial = 5;     // --seconds-per-trial
  std::string write_config;         // --write-config FILE (empty: the settings are printed, no file written)
  double min_cosine = 0.999;        // --min-cosine: a precision is taken only if every embedding stays this close to f32's
  int64_t max_workers = 0;          // --max-workers (0: the cores)
  double min_centered_cosine = 0.99;  // --min-centered-cosine: int8 is taken only if its mean centered cosine to the reference reaches this
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
};

TuneResult run_tune(const TuneOptions& options);

// `stoke tune train`: the batch size (doubled while it helps and fits, with
// the linear LR scaling rule from the starting batch: --lr-scale-from), then
// precision (bf16 where native, with the training loss after the trial's
// steps compared to f32's on the same batches and dropout masks).
struct TuneTrainOptions {
  TrainOptions train;               // the job's flags: the starting point
  int64_t steps_per_trial = 20;     // --steps-per-trial
  std::string write_config;         // as TuneOptions::write_config
  double max_loss_change = 0.02;    // --max-loss-change: bf16 is taken only if its loss stays this close (relative)
};

TuneResult run_tune_train(const TuneTrainOptions& options);

}  // namespace stoke
