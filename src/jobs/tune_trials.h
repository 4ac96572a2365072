// What `stoke tune embed` and `stoke tune train` share: the scratch folders
// their trials write into, the race of a candidate against the best so far
// (tune_significance.h decides it), the stop between trials, and how the
// winning settings are delivered.
#pragma once

#include <atomic>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "jobs/tune_job.h"
#include "jobs/tune_significance.h"

namespace stoke::tuning {

// Trial outputs, numbered, in one temporary folder removed at the end.
class Scratch {
 public:
  std::filesystem::path next() { return folder_.path() / ("trial-" + std::to_string(n_++)); }

 private:
  TempFolder folder_{"stoke-tune"};
  int n_ = 0;
};

// A stop was asked for (TuneOptions::cancel) before a trial, or stopped it:
// the search ends there. Names the row being decided.
struct Interrupted {
  std::string knob, value;
};

// Throws Interrupted{knob, value} when `cancel` says stop: called before every trial.
void check_stop(const std::atomic<bool>* cancel, const std::string& knob, const std::string& value);

// The row for the trial or race a stop cut short.
TuneTrial interrupted_row(const Interrupted& stop);

// What an interrupted tune says when not even the starting point's trial
// completed: there is nothing to compare a setting with.
constexpr const char* kNothingToWrite =
    "interrupted before the starting point's trial completed: no settings found, nothing written\n";

// The race's row: the candidate's first run, its rates replaced by the
// medians of its runs, and what the comparison found.
TuneTrial race_row(TuneTrial first, const std::vector<double>& cand, const std::vector<double>& cand_tokens,
                   const std::vector<double>& cand_busy, const RateComparison& cmp);

// One candidate against the current best, run alternately (candidate,
// baseline, candidate, ...) until compare_rates decides. `run(candidate)`
// runs one trial and returns it (an Interrupted from it ends the race).
template <class Run>
std::pair<TuneTrial, RateComparison> race(Run run) {
  std::vector<double> cand, base, cand_tokens, cand_busy;
  TuneTrial first;
  RateComparison cmp;
  while (cmp.verdict == Significance::need_more_runs) {
    const TuneTrial c = run(true);
    const TuneTrial b = run(false);
    if (cand.empty()) first = c;
    cand.push_back(c.texts_per_second);
    cand_tokens.push_back(c.tokens_per_second);
    cand_busy.push_back(c.device_busy);
    base.push_back(b.texts_per_second);
    cmp = compare_rates(cand, base);
  }
  return {race_row(first, cand, cand_tokens, cand_busy, cmp), cmp};
}

// ---- the knobs, as the job's option table declares them -----------------------

// "--batch-tokens" -> "batch-tokens": a knob's name in the trial table and
// its key in the config (--config takes keys with or without the dashes).
inline std::string knob_key(const std::string& flag) { return flag.substr(2); }

// A setting as the config tune writes holds it: the flag, the value as its
// table entry shows it, and whether --config takes it as a number.
struct TunedSetting {
  std::string flag, value;
  bool number = false;  // a whole number ({"workers": 2}), else text ({"precision": "bf16"})
};

// A knob tune turns is an entry of the job's option table: its rows and its
// key in the config are the flag without the dashes ("batch-tokens"), its
// values what the entry shows for the options a trial runs with. So tune
// spells and formats no flag of its own, and what it writes reads back
// through the same entries (`--config tuned.json`).
template <class O>
class Knob {
 public:
  Knob(const OptionTable<O>& table, const char* flag) : entry_(find_option(table, flag)) {
    if (entry_ == nullptr || !entry_->show)
      throw Error(Errc::internal, std::string("stoke tune: the job's option table shows no ") + flag);
  }
  std::string name() const { return knob_key(entry_->flag); }
  std::string value(const O& options) const { return entry_->show(options); }
  TunedSetting setting(const O& options) const {
    return {entry_->flag, value(options), entry_->kind == OptionKind::integer};
  }

 private:
  const Option<O>* entry_;
};

// The winning settings as --config reads them (a JSON object, as text) and
// as flags ("--workers 2 --batch-tokens 16384 --precision f32"), in order.
struct TunedConfig {
  std::string json, flags;
};
TunedConfig tuned_config(const std::vector<TunedSetting>& settings);

// What the changes bought: never "1.00x" beside changed settings, since a
// change is taken only when significantly faster.
std::string speedup_phrase(double speedup);

// The settings: written where --write-config names a file, else printed (a
// tune run leaves no file nobody asked for). `interrupted`: they are the best
// of the trials a stop left completed, and the line says so.
std::string deliver_config(const std::string& path, const std::string& config_json, const std::string& job,
                           bool interrupted);

}  // namespace stoke::tuning
