#include "jobs/tune_job.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"
#include "cpu/kernels.h"
#include "io/atomic_file.h"
#include "jobs/tune_embeddings.h"
#include "jobs/tune_significance.h"

namespace stoke {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Trial outputs, numbered, in one temporary folder removed at the end.
class Scratch {
 public:
  std::filesystem::path next() { return folder_.path() / ("trial-" + std::to_string(n_++)); }

 private:
  TempFolder folder_{"stoke-tune"};
  int n_ = 0;
};

struct Setting {
  int workers = 1;
  int64_t batch_tokens = 16384;
  std::string precision = "f32";
};

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One candidate against the current best, run alternately (candidate,
// baseline, candidate, ...) until compare_rates decides. `run(candidate)`
// runs one trial and returns it. The row shown is the candidate's, with the
// median rates of its runs and what the comparison found.
template <class Run>
std::pair<TuneTrial, RateComparison> race(Run run) {
  std::vector<double> cand, base, cand_tokens, cand_busy;
  TuneTrial shown;
  RateComparison cmp;
  while (cmp.verdict == Significance::need_more_runs) {
    const TuneTrial c = run(true);
    const TuneTrial b = run(false);
    if (cand.empty()) shown = c;
    cand.push_back(c.texts_per_second);
    cand_tokens.push_back(c.tokens_per_second);
    cand_busy.push_back(c.device_busy);
    base.push_back(b.texts_per_second);
    cmp = compare_rates(cand, base);
  }
  shown.texts_per_second = median_of(cand);
  shown.tokens_per_second = median_of(cand_tokens);
  shown.device_busy = median_of(cand_busy);
  char note[200];
  const int runs = static_cast<int>(cand.size());
  switch (cmp.verdict) {
    case Significance::faster:
      std::snprintf(note, sizeof note, "%.2fx the best so far (%d+%d runs, spread %.0f%%)", cmp.ratio, runs, runs,
                    100 * cmp.spread);
      break;
    case Significance::slower:
      std::snprintf(note, sizeof note, "%.2fx: slower (%d+%d runs, spread %.0f%%)", cmp.ratio, runs, runs,
                    100 * cmp.spread);
      break;
    default:
      std::snprintf(note, sizeof note, "no significant difference (%.2fx within a run-to-run spread of %.0f%%, %d+%d runs)",
                    cmp.ratio, 100 * cmp.spread, runs, runs);
  }
  shown.note = note;
  return {shown, cmp};
}

// What the changes bought: never "1.00x" beside changed settings, since a
// change is taken only when significantly faster.
std::string speedup_phrase(double speedup) {
  if (speedup == 1) return "(the starting point: no change made a significant difference)\n";
  char b[96];
  std::snprintf(b, sizeof b, "(%.2fx the starting point, from paired runs)\n", speedup);
  return b;
}

// The settings: written where --write-config names a file, else printed (a
// tune run leaves no file nobody asked for).
std::string deliver_config(const std::string& path, const std::string& config_json, const std::string& job) {
  if (path.empty())
    return "settings (save them with --write-config FILE, then `stoke " + job + " --config FILE ...`):\n" + config_json;
  write_file_atomic(path, std::string_view(config_json));
  return "written to " + path + " (use: stoke " + job + " --config " + path + " ...)\n";
}

// `stoke tune embed`, one knob at a time from the flags given. Each change is
// raced against the current best (tune_significance.h): it is taken only when
// faster beyond the run-to-run spread. The speedup is the product of the
// changes' measured ratios (each from paired runs), so a run that changes
// nothing reports no speedup.
class EmbedTuning {
 public:
  explicit EmbedTuning(const TuneOptions& o) : o_(o) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    max_workers_ = o.max_workers > 0 ? static_cast<int>(o.max_workers) : std::max(cores, 2);
    best_.workers = o.embed.common.workers > 0 ? o.embed.common.workers : 1;
    best_.batch_tokens = o.embed.common.batch_tokens;
    best_.precision = o.embed.common.precision;
  }

  // 0. The starting point.
  void start() {
    TuneTrial base = trial(best_, "start",
                           "workers " + std::to_string(best_.workers) + ", batch-tokens " +
                               std::to_string(best_.batch_tokens) + ", " + best_.precision)
                         .first;
    base.chosen = true;
    result_.trials.push_back(base);
  }

  // 1. Tokenizer workers: 1, 2, 4, ... up to the cores.
  void tune_workers() {
    const int start = best_.workers;
    for (int w : {1, 2, 3, 4, 6, 8, 12, 16}) {
      if (w == start || w > max_workers_) continue;
      Setting s = best_;
      s.workers = w;
      auto [t, cmp] = race_setting(s, "workers", std::to_string(w));
      if (cmp.verdict == Significance::faster) {
        speedup_ *= cmp.ratio;
        best_.workers = w;
        for (auto& x : result_.trials)
          if (x.knob == "workers" || x.knob == "start") x.chosen = false;
        t.chosen = true;
      }
      result_.trials.push_back(t);
    }
  }

  // 2. Token budget: double while it helps, up to the memory limit (the
  // largest budget whose workspace fits), then one step down from the limit.
  void tune_batch_tokens() {
    const int64_t limit = int64_t{1} << 20;  // 1M tokens per batch: far past any useful CPU batch
    int64_t b = best_.batch_tokens;
    bool hit_limit = false;
    for (int i = 0; i < 4; ++i) {
      b *= 2;
      if (b > limit) {
        hit_limit = true;
        break;
      }
      Setting s = best_;
      s.batch_tokens = b;
      auto [t, cmp] = race_setting(s, "batch-tokens", std::to_string(b));
      const bool better = cmp.verdict == Significance::faster;
      if (better) {
        speedup_ *= cmp.ratio;
        best_.batch_tokens = b;
        for (auto& x : result_.trials)
          if (x.knob == "batch-tokens") x.chosen = false;
        t.chosen = true;
      }
      result_.trials.push_back(t);
      if (!better) break;
    }
    if (hit_limit && best_.batch_tokens == limit) best_.batch_tokens = limit / 2;  // one step down from the limit
  }

  // 3. Precision: bf16 where the device multiplies it natively (a GPU, or a
  // CPU with AVX512-BF16/AMX), with its embeddings compared to f32's on the
  // same texts.
  void tune_precision() {
    if (best_.precision != "f32" || !device_native_bf16_) {
      TuneTrial t;
      t.knob = "precision";
      t.value = best_.precision;
      t.note = best_.precision == "f32" ? "skipped: this CPU has no native bf16 (it would be slower)" : "kept as given";
      result_.trials.push_back(t);
      return;
    }
    Setting s = best_;
    s.precision = "bf16";
    // The first pair's outputs are kept for the quality comparison.
    std::string dir, ref_dir;
    TuneTrial ref;
    auto [t, cmp] = race([&](bool is_candidate) {
      auto [run, out] = trial(is_candidate ? s : best_, "precision", is_candidate ? "bf16" : "f32 (reference)");
      if (is_candidate && dir.empty()) dir = out;
      if (!is_candidate && ref_dir.empty()) {
        ref_dir = out;
        ref = run;
      }
      return run;
    });
    const CosineAgreement q = bf16_agreement(ref_dir, dir);
    char note[160];
    std::snprintf(note, sizeof note, "vs f32 over %zu texts: 1 - cosine mean %.1e, worst %.1e", q.rows, q.mean_gap,
                  1.0 - q.worst);
    t.note += std::string("; ") + note;
    if (q.rows > 0 && q.worst >= o_.min_cosine && cmp.verdict == Significance::faster) {
      speedup_ *= cmp.ratio;
      best_.precision = "bf16";
      t.chosen = true;
    } else if (q.rows > 0 && q.worst < o_.min_cosine) {
      t.note += " (below --min-cosine " + std::to_string(o_.min_cosine) + ": not taken)";
    }
    ref.note = "the reference for bf16's quality";
    result_.trials.push_back(ref);
    result_.trials.push_back(t);
  }

  // 4. int8 (CPU only): the layers' GEMMs quantized, raced against the best
  // setting so far, whose outputs are the quality reference. Taken only if
  // faster and its mean centered cosine reaches --min-centered-cosine; the
  // worst raw cosine is reported, not gated (the raw gate for bf16 would
  // never admit int8).
  void tune_int8() {
    TuneTrial skip;
    skip.knob = "precision";
    skip.value = "int8";
    if (best_.precision != "f32" && best_.precision != "bf16") return;  // given (f16, int8): the precision row says so
    if (device_name_ != "cpu") {
      skip.note = "skipped: int8 runs on the CPU only";
    } else if (!cpu::cpu_has_int8_dot()) {
      skip.note = "skipped: this CPU has no VNNI or AMX-INT8 (int8 would not be faster)";
    }
    if (!skip.note.empty()) {
      result_.trials.push_back(skip);
      return;
    }
    Setting s = best_;
    s.precision = "int8";
    const std::string base_precision = best_.precision;
    std::string dir, ref_dir;
    auto [t, cmp] = race([&](bool is_candidate) {
      auto [run, out] = trial(is_candidate ? s : best_, "precision", is_candidate ? "int8" : base_precision);
      if (is_candidate && dir.empty()) dir = out;
      if (!is_candidate && ref_dir.empty()) ref_dir = out;
      return run;
    });
    const CosineAgreement q = bf16_agreement(ref_dir, dir);
    char note[200];
    std::snprintf(note, sizeof note, "vs %s over %zu texts: centered cosine mean %.4f, raw cosine worst %.4f",
                  base_precision.c_str(), q.rows, q.centered_mean, q.worst);
    t.note += std::string("; ") + note;
    if (q.rows > 0 && q.centered_mean >= o_.min_centered_cosine && cmp.verdict == Significance::faster) {
      speedup_ *= cmp.ratio;
      best_.precision = "int8";
      t.chosen = true;
    } else if (q.rows > 0 && q.centered_mean < o_.min_centered_cosine) {
      char below[96];
      std::snprintf(below, sizeof below, " (below --min-centered-cosine %g: not taken)", o_.min_centered_cosine);
      t.note += below;
    }
    result_.trials.push_back(t);
  }

  // The config, the table and the settings delivered.
  TuneResult finish() {
    TuneTrial graphs;
    graphs.knob = "graphs";
    graphs.value = "-";
    graphs.note = "CUDA only (this run is on the CPU)";
    result_.trials.push_back(graphs);
    const json config = {{"workers", best_.workers}, {"batch-tokens", best_.batch_tokens}, {"precision", best_.precision}};
    result_.config_json = config.dump(2) + "\n";
    result_.speedup = speedup_;
    char tail[300];
    std::snprintf(tail, sizeof tail, "\nbest: --workers %d --batch-tokens %lld --precision %s ", best_.workers,
                  static_cast<long long>(best_.batch_tokens), best_.precision.c_str());
    result_.table = trial_table() + tail + speedup_phrase(speedup_) +
                    deliver_config(o_.write_config, result_.config_json, "embed");
    return std::move(result_);
  }

 private:
  // One short embed run with setting `s` into a scratch folder: its row and the folder.
  std::pair<TuneTrial, std::string> trial(const Setting& s, const std::string& knob, const std::string& value) {
    EmbedOptions e = o_.embed;
    e.output = scratch_.next().string();
    e.common.quiet = true;
    e.common.workers = s.workers;
    e.common.batch_tokens = s.batch_tokens;
    e.common.precision = s.precision;
    e.common.trace.clear();
    e.stop_after_seconds = o_.seconds_per_trial;
    e.int8_quality_sample = false;  // the int8 trial is measured against the f32 trial itself
    const EmbedSummary r = run_embed(e);
    device_native_bf16_ = r.native_bf16;
    device_name_ = r.device;
    TuneTrial t;
    t.knob = knob;
    t.value = value;
    const double secs = std::max(r.pipeline.seconds, 1e-9);
    t.texts_per_second = static_cast<double>(r.texts) / secs;
    t.tokens_per_second = static_cast<double>(r.pipeline.real_tokens) / secs;
    t.device_busy = r.pipeline.device_busy >= 0 ? r.pipeline.device_busy / secs : 0;
    return {t, e.output};
  }

  // Candidate vs the current best, alternately, until the rule decides.
  std::pair<TuneTrial, RateComparison> race_setting(const Setting& candidate, const std::string& knob,
                                                    const std::string& value) {
    const Setting baseline = best_;
    return race([&](bool is_candidate) { return trial(is_candidate ? candidate : baseline, knob, value).first; });
  }

  // bf16's vectors against f32's, row by row, as the trials wrote them (f32
  // or f16 shards, whichever --output-dtype asked for).
  static CosineAgreement bf16_agreement(const std::string& ref_dir, const std::string& dir) {
    int64_t d1 = 0, d2 = 0;
    const std::vector<float> a = read_output_embeddings(ref_dir, &d1), c = read_output_embeddings(dir, &d2);
    return d1 > 0 && d1 == d2 ? cosine_agreement(a, c, d1) : CosineAgreement{};
  }

  std::string trial_table() const {
    char head[96];
    std::snprintf(head, sizeof head, "stoke tune embed: one knob at a time, %g s a trial", o_.seconds_per_trial);
    std::string table =
        std::string(head) + "\n\n  knob           value                                   texts/s   tokens/s  busy\n";
    for (const TuneTrial& t : result_.trials) {
      char line[400];
      if (t.texts_per_second > 0)
        std::snprintf(line, sizeof line, "  %-14s %-38s %8.1f %10.0f  %3.0f%% %s%s\n", t.knob.c_str(),
                      t.value.c_str(), t.texts_per_second, t.tokens_per_second, 100 * t.device_busy,
                      t.chosen ? "<- " : "", t.note.c_str());
      else
        std::snprintf(line, sizeof line, "  %-14s %-38s %8s %10s  %4s %s\n", t.knob.c_str(), t.value.c_str(), "-",
                      "-", "", t.note.c_str());
      table += line;
    }
    return table;
  }

  const TuneOptions& o_;
  Scratch scratch_;
  int max_workers_ = 1;
  Setting best_;
  double speedup_ = 1;
  bool device_native_bf16_ = false;  // the device the trials ran on (--device, auto resolved) multiplies bf16 natively
  std::string device_name_;          // that device ("cpu", "cuda:N")
  TuneResult result_;
};

}  // namespace

TuneResult run_tune(const TuneOptions& o) {
  if (o.seconds_per_trial <= 0) throw Error(Errc::invalid_argument, "--seconds-per-trial must be positive");
  if (!o.embed.output.empty())
    throw Error(Errc::invalid_argument, "stoke tune writes its trials to temporary folders: drop --output "
                                        "(run `stoke embed --config FILE --output ...` afterwards)");
  EmbedTuning tuning(o);
  tuning.start();
  tuning.tune_workers();
  tuning.tune_batch_tokens();
  tuning.tune_precision();
  tuning.tune_int8();
  return tuning.finish();
}

namespace {

// `stoke tune train`, as EmbedTuning: the batch size (doubled while it helps,
// the lr scaled by the linear rule from the starting batch), then bf16 where
// the device has it natively and the loss stays close to f32's.
class TrainTuning {
 public:
  TrainTuning(const TuneTrainOptions& o, int64_t start_batch)
      : o_(o), start_batch_(start_batch), best_batch_(start_batch), best_precision_(o.train.common.precision) {}

  // 0. The starting point.
  void start() {
    Outcome base = trial(start_batch_, best_precision_, "start",
                         "batch " + std::to_string(start_batch_) + ", " + best_precision_);
    base.trial.chosen = true;
    result_.trials.push_back(base.trial);
  }

  // 1. Batch size: doubling, with --lr-scale-from the starting batch.
  void tune_batch_size() {
    for (int64_t b = start_batch_ * 2; b <= o_.train.max_batch_size; b *= 2) {
      const std::string value = std::to_string(b) + " (lr x" + std::to_string(b / start_batch_) + ")";
      auto [t, cmp] = race([&](bool is_candidate) {
        return is_candidate ? trial(b, best_precision_, "batch-size", value).trial
                            : trial(best_batch_, best_precision_, "batch-size", "baseline").trial;
      });
      const bool better = cmp.verdict == Significance::faster;
      if (better) {
        speedup_ *= cmp.ratio;
        best_batch_ = b;
        for (auto& x : result_.trials) x.chosen = false;
        t.chosen = true;
      }
      result_.trials.push_back(t);
      if (!better) break;
    }
  }

  // 2. Precision, with the loss after the same steps compared to f32's.
  void tune_precision() {
    if (best_precision_ != "f32" || !device_native_bf16_) return;
    // The first pair's losses are compared (same batches, same masks).
    Outcome ref, t;
    bool have_ref = false, have_t = false;
    auto [shown, cmp] = race([&](bool is_candidate) {
      Outcome run = trial(best_batch_, is_candidate ? "bf16" : "f32", "precision",
                          is_candidate ? "bf16" : "f32 (reference)");
      if (is_candidate && !have_t) t = run, have_t = true;
      if (!is_candidate && !have_ref) ref = run, have_ref = true;
      return run.trial;
    });
    t.trial = shown;
    const double change = std::abs(t.loss - ref.loss) / std::max(std::abs(ref.loss), 1e-12);
    char note[160];
    std::snprintf(note, sizeof note, "loss after %lld steps %.5f vs f32 %.5f (%.2f%%)",
                  static_cast<long long>(o_.steps_per_trial), t.loss, ref.loss, 100 * change);
    t.trial.note += std::string("; ") + note;
    ref.trial.note = "the reference for bf16's loss";
    if (change <= o_.max_loss_change && cmp.verdict == Significance::faster) {
      speedup_ *= cmp.ratio;
      best_precision_ = "bf16";
      for (auto& x : result_.trials) x.chosen = false;
      t.trial.chosen = true;
    } else if (change > o_.max_loss_change) {
      t.trial.note += " (beyond --max-loss-change: not taken)";
    }
    result_.trials.push_back(ref.trial);
    result_.trials.push_back(t.trial);
  }

  // The config, the table and the settings delivered.
  TuneResult finish() {
    json config = {{"batch-size", std::to_string(best_batch_)}, {"precision", best_precision_}};
    if (best_batch_ != start_batch_) config["lr-scale-from"] = start_batch_;
    result_.config_json = config.dump(2) + "\n";
    result_.speedup = speedup_;
    char tail[300];
    std::snprintf(tail, sizeof tail, "\nbest: --batch-size %lld%s --precision %s ",
                  static_cast<long long>(best_batch_),
                  best_batch_ != start_batch_ ? (" --lr-scale-from " + std::to_string(start_batch_)).c_str() : "",
                  best_precision_.c_str());
    result_.table = trial_table() + tail + speedup_phrase(speedup_) +
                    deliver_config(o_.write_config, result_.config_json, "train");
    return std::move(result_);
  }

 private:
  struct Outcome {
    TuneTrial trial;
    double loss = 0;
  };

  // One short training run (--steps-per-trial steps, no eval, no checkpoints).
  Outcome trial(int64_t batch, const std::string& precision, const std::string& knob, const std::string& value) {
    TrainOptions t = o_.train;
    t.output = scratch_.next().string();
    t.common.quiet = true;
    t.common.precision = precision;
    t.common.trace.clear();
    t.batch_size = std::to_string(batch);
    t.max_steps = o_.steps_per_trial;
    t.save_every = 0;
    t.eval.clear();
    t.log_every = o_.steps_per_trial;
    if (batch != start_batch_) t.lr_scale_from = start_batch_;  // the linear scaling rule keeps the lr right
    const TrainSummary r = run_train(t);
    device_native_bf16_ = r.native_bf16;
    Outcome out;
    out.trial.knob = knob;
    out.trial.value = value;
    out.trial.texts_per_second = r.samples_per_s;
    out.trial.tokens_per_second = r.tokens_per_s;
    out.trial.device_busy = r.seconds > 0 && r.device_busy_seconds >= 0 ? r.device_busy_seconds / r.seconds : 0;
    out.loss = r.last_loss;
    return out;
  }

  std::string trial_table() const {
    char head[120];
    std::snprintf(head, sizeof head, "stoke tune train: one knob at a time, %lld steps a trial",
                  static_cast<long long>(o_.steps_per_trial));
    std::string table =
        std::string(head) + "\n\n  knob           value                          samples/s   tokens/s  busy\n";
    for (const TuneTrial& t : result_.trials) {
      char line[400];
      std::snprintf(line, sizeof line, "  %-14s %-29s %9.1f %10.0f  %3.0f%% %s%s\n", t.knob.c_str(), t.value.c_str(),
                    t.texts_per_second, t.tokens_per_second, 100 * t.device_busy, t.chosen ? "<- " : "",
                    t.note.c_str());
      table += line;
    }
    return table;
  }

  const TuneTrainOptions& o_;
  Scratch scratch_;
  const int64_t start_batch_;
  int64_t best_batch_;
  std::string best_precision_;
  double speedup_ = 1;
  bool device_native_bf16_ = false;  // the device the trials ran on multiplies bf16 natively
  TuneResult result_;
};

}  // namespace

TuneResult run_tune_train(const TuneTrainOptions& o) {
  if (o.steps_per_trial <= 0) throw Error(Errc::invalid_argument, "--steps-per-trial must be positive");
  if (!o.train.output.empty())
    throw Error(Errc::invalid_argument, "stoke tune writes its trials to temporary folders: drop --output "
                                        "(run `stoke train --config FILE --output ...` afterwards)");
  if (o.train.batch_size == "auto")
    throw Error(Errc::invalid_argument, "stoke tune train: start from a number (--batch-size 8); tune searches up from it");
  int64_t start_batch = 0;
  try {
    start_batch = std::stoll(o.train.batch_size);
  } catch (...) {
  }
  if (start_batch <= 0) throw Error(Errc::invalid_argument, "--batch-size \"" + o.train.batch_size + "\": expected a number");
  TrainTuning tuning(o, start_batch);
  tuning.start();
  tuning.tune_batch_size();
  tuning.tune_precision();
  return tuning.finish();
}

}  // namespace stoke
