#include "jobs/tune_job.h"

#include <algorithm>
#include <cstdio>
#include <thread>
#include <tuple>

#include "core/error.h"
#include "cpu/kernels.h"
#include "jobs/tune_embeddings.h"
#include "jobs/tune_trials.h"

namespace stoke {

namespace {

using tuning::check_stop;
using tuning::deliver_config;
using tuning::Interrupted;
using tuning::interrupted_row;
using tuning::Knob;
using tuning::kNothingToWrite;
using tuning::race;
using tuning::Scratch;
using tuning::speedup_phrase;
using tuning::tuned_config;

// `stoke tune embed`, one knob at a time from the flags given. Each change is
// raced against the current best (tune_significance.h): it is taken only when
// faster beyond the run-to-run spread. The speedup is the product of the
// changes' measured ratios (each from paired runs), so a run that changes
// nothing reports no speedup. A setting is the embed options a trial runs
// with; its knobs are embed's table entries (tuning::Knob), which name the
// rows and spell the values.
class EmbedTuning {
 public:
  EmbedTuning(const TuneOptions& o, std::vector<Precision> try_precisions)
      : o_(o), try_(std::move(try_precisions)), best_(o.embed) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    max_workers_ = o.max_workers > 0 ? static_cast<int>(o.max_workers) : std::max(cores, 2);
    best_.common.workers = o.embed.common.workers > 0 ? o.embed.common.workers : 1;
  }

  // 0. The starting point.
  void start() {
    TuneTrial base = trial(best_, "start",
                           workers_.name() + " " + workers_.value(best_) + ", " + batch_tokens_.name() + " " +
                               batch_tokens_.value(best_) + ", " + precision_.value(best_))
                         .first;
    base.chosen = true;
    result_.trials.push_back(base);
  }

  // 1. Tokenizer workers: 1, 2, 4, ... up to the cores.
  void tune_workers() {
    const int start = best_.common.workers;
    for (int w : {1, 2, 3, 4, 6, 8, 12, 16}) {
      if (w == start || w > max_workers_) continue;
      EmbedOptions s = best_;
      s.common.workers = w;
      auto [t, cmp] = race_setting(s, workers_);
      if (cmp.verdict == Significance::faster) {
        speedup_ *= cmp.ratio;
        best_.common.workers = w;
        for (auto& x : result_.trials)
          if (x.knob == workers_.name() || x.knob == "start") x.chosen = false;
        t.chosen = true;
      }
      result_.trials.push_back(t);
    }
  }

  // 2. Token budget: double while it helps, up to the memory limit (the
  // largest budget whose workspace fits), then one step down from the limit.
  void tune_batch_tokens() {
    const int64_t limit = int64_t{1} << 20;  // 1M tokens per batch: far past any useful CPU batch
    int64_t b = best_.common.batch_tokens;
    bool hit_limit = false;
    for (int i = 0; i < 4; ++i) {
      b *= 2;
      if (b > limit) {
        hit_limit = true;
        break;
      }
      EmbedOptions s = best_;
      s.common.batch_tokens = b;
      auto [t, cmp] = race_setting(s, batch_tokens_);
      const bool better = cmp.verdict == Significance::faster;
      if (better) {
        speedup_ *= cmp.ratio;
        best_.common.batch_tokens = b;
        for (auto& x : result_.trials)
          if (x.knob == batch_tokens_.name()) x.chosen = false;
        t.chosen = true;
      }
      result_.trials.push_back(t);
      if (!better) break;
    }
    if (hit_limit && best_.common.batch_tokens == limit)
      best_.common.batch_tokens = limit / 2;  // one step down from the limit
  }

  // 3. Precision: only those --try-precisions names. Any other precision
  // changes every vector (bf16 and f16 beyond f32's rounding, int8 by
  // quantizing), so the one given is kept unless the user asks; each one tried
  // races the best so far and has its vectors compared with f32's.
  void tune_precision() {
    const Precision start = best_.common.precision;
    std::vector<Precision> not_tried;
    for (const auto& [word, p] : precision_words()) {
      if (p == start) continue;
      if (std::find(try_.begin(), try_.end(), p) != try_.end())
        try_precision(p);
      else if (worth_trying(p))
        not_tried.push_back(p);
    }
    if (not_tried.empty()) return;
    std::string names, list;
    for (const Precision p : not_tried) {
      names += (names.empty() ? "" : ", ") + precision_name(p);
      list += (list.empty() ? "" : ",") + precision_name(p);
    }
    const bool one = not_tried.size() == 1, only_f32 = one && not_tried[0] == Precision::f32;
    TuneTrial t;
    t.knob = precision_.name();
    t.value = names;
    t.note = std::string("not tried: ") + (one ? "it changes" : "they change") + " every vector; --try-precisions " +
             list + " lets tune race " + (one ? "it" : "them") +
             (only_f32 ? "" : one ? ", with its quality measured against f32" : ", with their quality measured against f32");
    result_.trials.push_back(t);
  }

  // The config, the table and the settings delivered; `stop`: where a stop
  // request ended the search.
  TuneResult finish(const Interrupted* stop = nullptr) {
    if (stop != nullptr) {
      result_.trials.push_back(interrupted_row(*stop));
      result_.interrupted = true;
    } else {
      TuneTrial graphs;
      graphs.knob = "graphs";
      graphs.value = "-";
      graphs.note = "CUDA only (this run is on the CPU)";
      result_.trials.push_back(graphs);
    }
    result_.speedup = speedup_;
    if (!started_) {
      result_.table = trial_table() + "\n" + kNothingToWrite;
      return std::move(result_);
    }
    const tuning::TunedConfig config =
        tuned_config({workers_.setting(best_), batch_tokens_.setting(best_), precision_.setting(best_)});
    result_.config_json = config.json;
    result_.table = trial_table() + "\nbest: " + config.flags + " " + speedup_phrase(speedup_) +
                    deliver_config(o_.write_config, result_.config_json, "embed", result_.interrupted);
    return std::move(result_);
  }

 private:
  // Whether precision `p` can be faster than f32 on the trials' device: the
  // ones "not tried" names (bf16 where it is native, f16 on CUDA, int8 on a
  // CPU). f32 itself always can, from a lower start.
  bool worth_trying(Precision p) const {
    switch (p) {
      case Precision::bf16: return device_native_bf16_;
      case Precision::f16: return device_name_ != "cpu";
      case Precision::int8: return device_name_ == "cpu" && cpu::cpu_has_int8_dot();
      case Precision::f32: return true;
    }
    return true;
  }

  // Why precision `p`, asked for, is not raced on this device ("": it is).
  std::string skip_reason(Precision p) const {
    if (p == Precision::bf16 && !device_native_bf16_)
      return "skipped: this CPU has no native bf16 (it would be slower)";
    if (p == Precision::f16 && device_name_ == "cpu")
      return "skipped: f16 is fast on CUDA only (this run is on the CPU)";
    if (p == Precision::int8 && device_name_ != "cpu") return "skipped: int8 runs on the CPU only";
    if (p == Precision::int8 && !cpu::cpu_has_int8_dot())
      return "skipped: this CPU has no VNNI or AMX-INT8 (int8 would not be faster)";
    return "";
  }

  // Precision `p` raced against the best so far; its vectors compared with
  // f32's (the latest f32 trial: f32 rows agree across batch shapes to 1e-6).
  // Taken when faster and its mean centered cosine reaches
  // --min-centered-cosine; bf16 and f16 must also keep every text's raw
  // cosine at --min-cosine (int8 never would: its raw figure is reported).
  void try_precision(Precision p) {
    EmbedOptions s = best_;
    s.common.precision = p;
    const std::string knob = precision_.name(), value = precision_.value(s);
    TuneTrial t;
    t.knob = knob;
    t.value = value;
    if (t.note = skip_reason(p); !t.note.empty()) {
      result_.trials.push_back(t);
      return;
    }
    if (p != Precision::f32 && f32_dir_.empty()) {  // started lower: one f32 run, only to measure against
      EmbedOptions f32 = best_;
      f32.common.precision = Precision::f32;
      TuneTrial ref = trial(f32, knob, precision_.value(f32) + " (reference)").first;
      ref.note = "the reference for the other precisions' quality (not a candidate)";
      result_.trials.push_back(ref);
    }
    std::string dir;  // the candidate's first output
    RateComparison cmp;
    std::tie(t, cmp) = race([&](bool is_candidate) {
      auto [run, out] = trial(is_candidate ? s : best_, knob, value);
      if (is_candidate && dir.empty()) dir = out;
      return run;
    });
    bool good = true;
    if (p == Precision::f32) {
      t.note += "; f32 is the reference";
    } else {
      const CosineAgreement q = agreement(f32_dir_, dir);
      t.note += "; " + quality_vs_f32(q);
      char below[96] = "";
      if (q.rows == 0) {
        std::snprintf(below, sizeof below, " (not taken)");
      } else if (q.centered_mean < o_.min_centered_cosine) {
        std::snprintf(below, sizeof below, " (below --min-centered-cosine %g: not taken)", o_.min_centered_cosine);
      } else if (p != Precision::int8 && q.worst < o_.min_cosine) {
        std::snprintf(below, sizeof below, " (below --min-cosine %g: not taken)", o_.min_cosine);
      }
      good = below[0] == '\0';
      t.note += below;
    }
    if (good && cmp.verdict == Significance::faster) {
      speedup_ *= cmp.ratio;
      best_.common.precision = p;
      for (auto& x : result_.trials)
        if (x.knob == precision_.name()) x.chosen = false;
      t.chosen = true;
    }
    result_.trials.push_back(t);
  }

  // One short embed run with setting `s` into a scratch folder: its row and
  // the folder. Throws Interrupted when a stop was asked for before it, or
  // stopped it (a partial run measures nothing).
  std::pair<TuneTrial, std::string> trial(const EmbedOptions& s, const std::string& knob, const std::string& value) {
    check_stop(o_.cancel, knob, value);
    EmbedOptions e = s;
    e.output = scratch_.next().string();
    e.common.quiet = true;
    e.common.trace.clear();
    e.stop_after_seconds = o_.seconds_per_trial;
    e.int8_quality_sample = false;  // tune measures every precision against its own f32 trial
    e.cancel = o_.cancel;
    const EmbedSummary r = run_embed(e);
    if (r.cancelled) throw Interrupted{knob, value};
    if (knob == "start") started_ = true;
    if (s.common.precision == Precision::f32) f32_dir_ = e.output;
    device_native_bf16_ = r.native_bf16;
    device_name_ = r.device;
    TuneTrial t;
    t.knob = knob;
    t.value = value;
    const double secs = std::max(r.pipeline.seconds, 1e-9);
    // What the device ran: a deadline can drop the last window unwritten,
    // and its texts were still work done in the trial's time.
    t.texts_per_second = static_cast<double>(r.pipeline.submitted_texts) / secs;
    t.tokens_per_second = static_cast<double>(r.pipeline.real_tokens) / secs;
    t.device_busy = r.pipeline.device_busy >= 0 ? r.pipeline.device_busy / secs : 0;
    if (o_.after_trial) o_.after_trial();
    return {t, e.output};
  }

  // Candidate vs the current best, alternately, until the rule decides; the
  // row is the knob's, with the candidate's value.
  std::pair<TuneTrial, RateComparison> race_setting(const EmbedOptions& candidate, const Knob<EmbedOptions>& knob) {
    const EmbedOptions baseline = best_;
    const std::string name = knob.name(), value = knob.value(candidate);
    return race([&](bool is_candidate) { return trial(is_candidate ? candidate : baseline, name, value).first; });
  }

  // A precision's vectors against f32's, row by row, as the trials wrote them
  // (f32 or f16 shards, whichever --output-dtype asked for).
  static CosineAgreement agreement(const std::string& f32_dir, const std::string& dir) {
    if (f32_dir.empty() || dir.empty()) return {};
    int64_t d1 = 0, d2 = 0;
    const std::vector<float> a = read_output_embeddings(f32_dir, &d1), c = read_output_embeddings(dir, &d2);
    return d1 > 0 && d1 == d2 ? cosine_agreement(a, c, d1) : CosineAgreement{};
  }

  std::string trial_table() const {
    char head[128];
    std::snprintf(head, sizeof head, "stoke tune embed: one knob at a time, %g s a trial%s", o_.seconds_per_trial,
                  result_.interrupted ? " (interrupted: the trials completed before the stop)" : "");
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

  // The knobs, as embed's table declares them.
  const Knob<EmbedOptions> workers_{embed_option_table(), "--workers"};
  const Knob<EmbedOptions> batch_tokens_{embed_option_table(), "--batch-tokens"};
  const Knob<EmbedOptions> precision_{embed_option_table(), "--precision"};
  const TuneOptions& o_;
  const std::vector<Precision> try_;  // --try-precisions, parsed
  Scratch scratch_;
  int max_workers_ = 1;
  EmbedOptions best_;  // the settings taken so far: the flags given, the knobs turned
  double speedup_ = 1;
  bool device_native_bf16_ = false;  // the device the trials ran on (--device, auto resolved) multiplies bf16 natively
  std::string device_name_;          // that device ("cpu", "cuda:N")
  bool started_ = false;             // the starting point's trial completed
  std::string f32_dir_;              // the latest f32 trial's output: every other precision's reference
  TuneResult result_;
};

}  // namespace

TuneResult run_tune(const TuneOptions& o) {
  if (o.seconds_per_trial <= 0) throw Error(Errc::invalid_argument, "--seconds-per-trial must be positive");
  if (!o.embed.output.empty())
    throw Error(Errc::invalid_argument, "stoke tune writes its trials to temporary folders: drop --output "
                                        "(run `stoke embed --config FILE --output ...` afterwards)");
  std::vector<Precision> try_precisions;  // checked before any trial runs
  for (const std::string& p : o.try_precisions) try_precisions.push_back(parse_precision("--try-precisions", p));
  EmbedTuning tuning(o, std::move(try_precisions));
  try {
    tuning.start();
    tuning.tune_workers();
    tuning.tune_batch_tokens();
    tuning.tune_precision();
  } catch (const Interrupted& stop) {
    return tuning.finish(&stop);
  }
  return tuning.finish();
}

}  // namespace stoke
