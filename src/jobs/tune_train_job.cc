// `stoke tune train` (declared in jobs/tune_job.h beside `stoke tune embed`).
#include "jobs/tune_job.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
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

// `stoke tune train`, as `stoke tune embed` (tune_job.cc): the batch size
// (doubled while it helps, the lr scaled by the linear rule from the starting
// batch), then bf16 where the device has it natively and the loss stays close
// to f32's. Its knobs are train's table entries (tuning::Knob), which name
// the rows and spell the values.
class TrainTuning {
 public:
  TrainTuning(const TuneTrainOptions& o, int64_t start_batch)
      : o_(o), start_batch_(start_batch), best_batch_(start_batch), best_precision_(o.train.common.precision) {}

  // 0. The starting point.
  void start() {
    const TrainOptions s = setting(start_batch_, best_precision_);
    Outcome base =
        trial(start_batch_, best_precision_, "start", "batch " + batch_size_.value(s) + ", " + precision_.value(s));
    base.trial.chosen = true;
    result_.trials.push_back(base.trial);
  }

  // 1. Batch size: doubling, with --lr-scale-from the starting batch.
  void tune_batch_size() {
    for (int64_t b = start_batch_ * 2; b <= o_.train.max_batch_size; b *= 2) {
      const std::string knob = batch_size_.name();
      const std::string value =
          batch_size_.value(setting(b, best_precision_)) + " (lr x" + std::to_string(b / start_batch_) + ")";
      auto [t, cmp] = race([&](bool is_candidate) {
        return is_candidate ? trial(b, best_precision_, knob, value).trial
                            : trial(best_batch_, best_precision_, knob, value).trial;  // the row shown is the candidate's
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
    if (best_precision_ != Precision::f32 || !device_native_bf16_) return;
    // The first pair's losses are compared (same batches, same masks).
    Outcome ref, t;
    bool have_ref = false, have_t = false;
    const std::string knob = precision_.name(), value = precision_.value(setting(best_batch_, Precision::bf16)),
                      reference = precision_.value(setting(best_batch_, Precision::f32)) + " (reference)";
    auto [shown, cmp] = race([&](bool is_candidate) {
      Outcome run = trial(best_batch_, is_candidate ? Precision::bf16 : Precision::f32, knob,
                          is_candidate ? value : reference);
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
      best_precision_ = Precision::bf16;
      for (auto& x : result_.trials) x.chosen = false;
      t.trial.chosen = true;
    } else if (change > o_.max_loss_change) {
      t.trial.note += " (beyond --max-loss-change: not taken)";
    }
    result_.trials.push_back(ref.trial);
    result_.trials.push_back(t.trial);
  }

  // The config, the table and the settings delivered; `stop`: as EmbedTuning's.
  TuneResult finish(const Interrupted* stop = nullptr) {
    result_.speedup = speedup_;
    if (stop != nullptr) {
      result_.trials.push_back(interrupted_row(*stop));
      result_.interrupted = true;
    }
    if (!started_) {
      result_.table = trial_table() + "\n" + kNothingToWrite;
      return std::move(result_);
    }
    const TrainOptions best = setting(best_batch_, best_precision_);
    std::vector<tuning::TunedSetting> settings = {batch_size_.setting(best)};
    if (best_batch_ != start_batch_) settings.push_back(lr_scale_from_.setting(best));  // the rule the lr needs
    settings.push_back(precision_.setting(best));
    const tuning::TunedConfig config = tuned_config(settings);
    result_.config_json = config.json;
    result_.table = trial_table() + "\nbest: " + config.flags + " " + speedup_phrase(speedup_) +
                    deliver_config(o_.write_config, result_.config_json, "train", result_.interrupted);
    return std::move(result_);
  }

 private:
  struct Outcome {
    TuneTrial trial;
    double loss = 0;
  };

  // The train options of a setting: the flags given, the knobs set.
  TrainOptions setting(int64_t batch, Precision precision) const {
    TrainOptions t = o_.train;
    t.common.precision = precision;
    t.batch_size = batch;
    t.batch_size_auto = false;
    if (batch != start_batch_) t.lr_scale_from = start_batch_;  // the linear scaling rule keeps the lr right
    return t;
  }

  // One short training run (--steps-per-trial steps, no eval, no checkpoints).
  // Throws Interrupted when a stop was asked for before it (a training trial
  // in flight runs its few steps to the end).
  Outcome trial(int64_t batch, Precision precision, const std::string& knob, const std::string& value) {
    check_stop(o_.cancel, knob, value);
    TrainOptions t = setting(batch, precision);
    t.output = scratch_.next().string();
    t.common.quiet = true;
    t.common.trace.clear();
    t.max_steps = o_.steps_per_trial;
    t.save_every = 0;
    t.eval.clear();
    t.log_every = o_.steps_per_trial;
    const TrainSummary r = run_train(t);
    if (knob == "start") started_ = true;
    device_native_bf16_ = r.native_bf16;
    Outcome out;
    out.trial.knob = knob;
    out.trial.value = value;
    out.trial.texts_per_second = r.samples_per_s;
    out.trial.tokens_per_second = r.tokens_per_s;
    out.trial.device_busy = r.seconds > 0 && r.device_busy_seconds >= 0 ? r.device_busy_seconds / r.seconds : 0;
    out.loss = r.last_loss;
    if (o_.after_trial) o_.after_trial();
    return out;
  }

  std::string trial_table() const {
    char head[160];
    std::snprintf(head, sizeof head, "stoke tune train: one knob at a time, %lld steps a trial%s",
                  static_cast<long long>(o_.steps_per_trial),
                  result_.interrupted ? " (interrupted: the trials completed before the stop)" : "");
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

  // The knobs, as train's table declares them.
  const Knob<TrainOptions> batch_size_{train_option_table(), "--batch-size"};
  const Knob<TrainOptions> lr_scale_from_{train_option_table(), "--lr-scale-from"};
  const Knob<TrainOptions> precision_{train_option_table(), "--precision"};
  const TuneTrainOptions& o_;
  Scratch scratch_;
  const int64_t start_batch_;
  int64_t best_batch_;
  Precision best_precision_;
  double speedup_ = 1;
  bool device_native_bf16_ = false;  // the device the trials ran on multiplies bf16 natively
  bool started_ = false;             // the starting point's trial completed
  TuneResult result_;
};

}  // namespace

TuneResult run_tune_train(const TuneTrainOptions& o) {
  if (o.steps_per_trial <= 0) throw Error(Errc::invalid_argument, "--steps-per-trial must be positive");
  if (!o.train.output.empty())
    throw Error(Errc::invalid_argument, "stoke tune writes its trials to temporary folders: drop --output "
                                        "(run `stoke train --config FILE --output ...` afterwards)");
  if (o.train.batch_size_auto)
    throw Error(Errc::invalid_argument, "stoke tune train: start from a number (--batch-size 8); tune searches up from it");
  const int64_t start_batch = o.train.batch_size;
  if (start_batch <= 0)
    throw Error(Errc::invalid_argument, "--batch-size " + std::to_string(start_batch) + ": expected a number");
  TrainTuning tuning(o, start_batch);
  try {
    tuning.start();
    tuning.tune_batch_size();
    tuning.tune_precision();
  } catch (const Interrupted& stop) {
    return tuning.finish(&stop);
  }
  return tuning.finish();
}

}  // namespace stoke
