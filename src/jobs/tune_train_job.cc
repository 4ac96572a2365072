// `stoke tune train` (declared in jobs/tune_job.h beside `stoke tune embed`).
#include "jobs/tune_job.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "jobs/tune_trials.h"

namespace stoke {

using nlohmann::json;

namespace {

using tuning::check_stop;
using tuning::deliver_config;
using tuning::Interrupted;
using tuning::interrupted_row;
using tuning::kNothingToWrite;
using tuning::race;
using tuning::Scratch;
using tuning::speedup_phrase;

// `stoke tune train`, as `stoke tune embed` (tune_job.cc): the batch size
// (doubled while it helps, the lr scaled by the linear rule from the starting
// batch), then bf16 where the device has it natively and the loss stays close
// to f32's.
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
                            : trial(best_batch_, best_precision_, "batch-size", value).trial;  // the row shown is the candidate's
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
    json config = {{"batch-size", std::to_string(best_batch_)}, {"precision", best_precision_}};
    if (best_batch_ != start_batch_) config["lr-scale-from"] = start_batch_;
    result_.config_json = config.dump(2) + "\n";
    char tail[300];
    std::snprintf(tail, sizeof tail, "\nbest: --batch-size %lld%s --precision %s ",
                  static_cast<long long>(best_batch_),
                  best_batch_ != start_batch_ ? (" --lr-scale-from " + std::to_string(start_batch_)).c_str() : "",
                  best_precision_.c_str());
    result_.table = trial_table() + tail + speedup_phrase(speedup_) +
                    deliver_config(o_.write_config, result_.config_json, "train", result_.interrupted);
    return std::move(result_);
  }

 private:
  struct Outcome {
    TuneTrial trial;
    double loss = 0;
  };

  // One short training run (--steps-per-trial steps, no eval, no checkpoints).
  // Throws Interrupted when a stop was asked for before it (a training trial
  // in flight runs its few steps to the end).
  Outcome trial(int64_t batch, const std::string& precision, const std::string& knob, const std::string& value) {
    check_stop(o_.cancel, knob, value);
    TrainOptions t = o_.train;
    t.output = scratch_.next().string();
    t.common.quiet = true;
    t.common.precision = precision;
    t.common.trace.clear();
    t.batch_size = batch;
    t.batch_size_auto = false;
    t.max_steps = o_.steps_per_trial;
    t.save_every = 0;
    t.eval.clear();
    t.log_every = o_.steps_per_trial;
    if (batch != start_batch_) t.lr_scale_from = start_batch_;  // the linear scaling rule keeps the lr right
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

  const TuneTrainOptions& o_;
  Scratch scratch_;
  const int64_t start_batch_;
  int64_t best_batch_;
  std::string best_precision_;
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
