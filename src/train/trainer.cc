#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/crash_point.h"
#include "core/error.h"
#include "core/progress.h"
#include "io/atomic_file.h"
#include "train/checkpoint.h"

namespace stoke::train {

namespace fs = std::filesystem;
using nlohmann::json;

const char* eval_strategy_name(EvalStrategy s) {
  switch (s) {
    case EvalStrategy::no: return "no";
    case EvalStrategy::steps: return "steps";
    case EvalStrategy::epoch: return "epoch";
  }
  return "?";
}

EvalStrategy eval_strategy_from_name(const std::string& name) {
  if (name == "no") return EvalStrategy::no;
  if (name == "steps") return EvalStrategy::steps;
  if (name == "epoch") return EvalStrategy::epoch;
  throw Error(Errc::invalid_argument, "--eval-strategy \"" + name + "\": expected steps, epoch or no");
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

Trainer::Trainer(TrainableEncoder& encoder, Backend& backend, const TrainerOptions& options,
                 const std::vector<Example>& train, const std::vector<Example>* eval, bool regression, SaveContext save)
    : enc_(encoder),
      backend_(backend),
      o_(options),
      train_(train),
      eval_(eval),
      regression_(regression),
      save_ctx_(std::move(save)),
      optimizer_(encoder, backend, options.optim) {
  if (o_.batch_size <= 0) throw Error(Errc::invalid_argument, "--batch-size must be positive");
  if (o_.grad_accum <= 0) throw Error(Errc::invalid_argument, "--grad-accum must be positive");
  if (o_.log_every <= 0) throw Error(Errc::invalid_argument, "--log-every must be positive");
  if (o_.eval_strategy == EvalStrategy::steps && o_.eval_every <= 0)
    throw Error(Errc::invalid_argument, "--eval-every must be positive");
  if (o_.eval_strategy != EvalStrategy::no && !eval_)
    throw Error(Errc::invalid_argument, "--eval-strategy " + std::string(eval_strategy_name(o_.eval_strategy)) +
                                            " needs --eval FILE");
  if (o_.load_best && o_.eval_strategy == EvalStrategy::no)
    throw Error(Errc::invalid_argument, "--load-best needs evaluations (--eval FILE and --eval-strategy)");
  if (o_.load_best && o_.metric != "eval_loss" && o_.metric != "eval_accuracy" && o_.metric != "eval_macro_f1")
    throw Error(Errc::invalid_argument, "--metric \"" + o_.metric + "\": expected eval_loss, eval_accuracy or eval_macro_f1");
  for (const Example& e : train_) lengths_.push_back(static_cast<int64_t>(e.ids.size()));
  if (o_.comm) {
    rank_ = o_.comm->rank();
    ranks_ = o_.comm->size();
  }
  global_batch_ = o_.batch_size * ranks_;
  const int64_t n = static_cast<int64_t>(train_.size());
  batches_per_epoch_ = (n + global_batch_ - 1) / global_batch_;
  steps_per_epoch_ = (batches_per_epoch_ + o_.grad_accum - 1) / o_.grad_accum;
  total_steps_ = o_.max_steps > 0 ? o_.max_steps : o_.epochs * steps_per_epoch_;
  if (total_steps_ <= 0) throw Error(Errc::invalid_argument, "nothing to train: 0 steps (--epochs / --max-steps)");
  schedule_.kind = o_.schedule;
  schedule_.total_steps = total_steps_;
  schedule_.warmup_steps = warmup_steps_for(total_steps_, o_.warmup_steps, o_.warmup_ratio);
  // The workspace holds the longest possible micro-batch: the batch's longest
  // examples side by side.
  std::vector<int64_t> sorted = lengths_;
  std::sort(sorted.rbegin(), sorted.rend());
  for (int64_t i = 0; i < std::min<int64_t>(o_.batch_size, n); ++i) max_tokens_ += sorted[static_cast<size_t>(i)];
  runner_ = std::make_unique<EncoderTrainingRunner>(enc_, backend_, max_tokens_, o_.batch_size);
  runner_->set_graphs(o_.graphs && ranks_ == 1);
  if (ranks_ > 1)
    reducer_ = std::make_unique<GradientReducer>(enc_, backend_, *o_.comm, o_.bucket_bytes, o_.device_allreduce);
  metrics_ = backend_.allocate(3 * sizeof(double));
  zeros_ = backend_.allocate_host(3 * sizeof(double));
  std::memset(zeros_->data(), 0, 3 * sizeof(double));
  backend_.copy_to_device(metrics_->data(), zeros_->data(), 3 * sizeof(double));
  metrics_host_.assign(3, 0.0);
}

Trainer::~Trainer() { backend_.drain(); }

json Trainer::state_json() const {
  json s;
  s["step"] = st_.step;
  s["epoch"] = st_.epoch;
  s["batch_in_epoch"] = st_.batch_in_epoch;
  s["micro_step"] = st_.micro_step;
  s["unlogged_metrics"] = {st_.metrics[0], st_.metrics[1], st_.metrics[2]};
  s["samples"] = st_.samples;
  s["tokens"] = st_.tokens;
  s["total_steps"] = total_steps_;
  s["schedule"] = {{"kind", schedule_name(schedule_.kind)},
                   {"warmup_steps", schedule_.warmup_steps},
                   {"total_steps", schedule_.total_steps}};
  s["lr_next"] = lr_at(o_.lr, schedule_, st_.step);
  if (st_.best) {
    s["best_metric"] = *st_.best;
    s["best_step"] = st_.best_step;
    s["best_checkpoint"] = st_.best_checkpoint;
  }
  s["identity"] = o_.identity;
  s["format"] = "stoke-trainer-state";
  s["version"] = 1;
  return s;
}

void Trainer::resume_from(const fs::path& checkpoint) {
  const json s = read_trainer_state(checkpoint);
  if (s.value("format", "") != "stoke-trainer-state")
    throw Error(Errc::format, (checkpoint / "trainer_state.json").string() + ": not a stoke trainer state");
  const json& was = s.at("identity");
  for (const auto& [key, value] : o_.identity.items()) {
    // Checkpoints from before data parallelism were written by one process.
    const json old = was.contains(key) ? was[key] : key == "ranks" ? json(1) : json();
    if (old.is_null() || old != value)
      throw Error(Errc::refused, "cannot resume from " + checkpoint.string() + ": " + key + " was " +
                                     (old.is_null() ? "unset" : old.dump()) + ", now " + value.dump() +
                                     " (resume with the same settings, or start a new --output)");
  }
  st_.step = s.at("step").get<int64_t>();
  st_.epoch = s.at("epoch").get<int64_t>();
  st_.batch_in_epoch = s.at("batch_in_epoch").get<int64_t>();
  st_.micro_step = s.at("micro_step").get<uint64_t>();
  for (int i = 0; i < 3; ++i) st_.metrics[i] = s.at("unlogged_metrics")[static_cast<size_t>(i)].get<double>();
  // The checkpoint's unlogged sums are over every rank: rank 0 carries them.
  if (rank_ != 0)
    for (double& m : st_.metrics) m = 0;
  st_.samples = s.at("samples").get<uint64_t>();
  st_.tokens = s.at("tokens").get<uint64_t>();
  if (s.contains("best_metric")) {
    st_.best = s["best_metric"].get<double>();
    st_.best_step = s["best_step"].get<int64_t>();
    st_.best_checkpoint = s["best_checkpoint"].get<std::string>();
  }
  std::vector<float> m, v;
  read_optimizer_state(checkpoint, enc_.layout, m, v);
  optimizer_.load_state(m.data(), v.data());
  backend_.synchronize();  // m, v go out of scope: their copies must have run
  report_.resumed_from_step = st_.step;
  report_.resumed_from = checkpoint.string();
  if (rank_ != 0) return;  // the log is rank 0's
  // The log keeps what the checkpoint had seen.
  const fs::path log_path = o_.output / "log.jsonl";
  std::ifstream in(log_path);
  std::string line, kept;
  while (std::getline(in, line)) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("step", int64_t{0}) <= st_.step) kept += line + "\n";
  }
  write_file_atomic(log_path, kept);
}

void Trainer::read_metrics(double out[3]) {
  backend_.copy_to_host(metrics_host_.data(), metrics_->data(), 3 * sizeof(double));
  backend_.copy_to_device(metrics_->data(), zeros_->data(), 3 * sizeof(double));
  backend_.wait(*backend_.record_event());
  ++report_.log_reads;
  for (int i = 0; i < 3; ++i) out[i] = st_.metrics[i] + metrics_host_[static_cast<size_t>(i)];
  for (double& m : st_.metrics) m = 0;
  sum_over_ranks(out);
}

// Every rank calls it at the same steps, with its executor idle (right after
// a host wait), so it never runs beside a gradient all-reduce.
void Trainer::sum_over_ranks(double m[3]) {
  if (ranks_ > 1) o_.comm->allreduce_sum(m, 3);
}

void Trainer::log(const json& line) {
  if (rank_ != 0) return;
  std::ofstream out(o_.output / "log.jsonl", std::ios::app);
  out << line.dump() << "\n";
  if (!out) throw Error(Errc::io, (o_.output / "log.jsonl").string() + ": cannot append");
}

double Trainer::metric_value(const EvalMetrics& m) const {
  if (o_.metric == "eval_accuracy") return m.accuracy;
  if (o_.metric == "eval_macro_f1") return m.macro_f1;
  return m.loss;
}

void Trainer::save(int64_t step) {
  // The unlogged metric sums travel in the state: read them (this save's
  // host sync covers the read too). Rank 0 alone writes; the others read
  // their metric sums for it.
  const bool writes = rank_ == 0;
  const int64_t n = writes ? enc_.layout.numel() : 0;
  std::vector<float> params(static_cast<size_t>(n)), m(static_cast<size_t>(n)), v(static_cast<size_t>(n));
  if (writes) {
    backend_.copy_to_host(params.data(), enc_.master_data(), static_cast<size_t>(n) * 4);
    optimizer_.copy_state_to_host(m.data(), v.data());
  }
  backend_.copy_to_host(metrics_host_.data(), metrics_->data(), 3 * sizeof(double));
  backend_.copy_to_device(metrics_->data(), zeros_->data(), 3 * sizeof(double));
  backend_.wait(*backend_.record_event());
  for (int i = 0; i < 3; ++i) st_.metrics[i] += metrics_host_[static_cast<size_t>(i)];
  if (ranks_ > 1) {  // the state holds the sums over every rank, carried by rank 0
    double all[3] = {st_.metrics[0], st_.metrics[1], st_.metrics[2]};
    sum_over_ranks(all);
    for (int i = 0; i < 3; ++i) st_.metrics[i] = writes ? all[i] : 0.0;
  }
  if (writes) {
    CheckpointContents c;
    c.layout = &enc_.layout;
    c.params = params.data();
    c.exp_avg = m.data();
    c.exp_avg_sq = v.data();
    c.config_json = save_ctx_.config_json;
    c.tokenizer_files = save_ctx_.tokenizer_files;
    c.extra_files = save_ctx_.extra_files;
    c.state = state_json();
    write_checkpoint(o_.output, step, c);
  }
  ++report_.saves;
  // Every rank passes the crash point once the checkpoint is on disk (a test
  // kills one rank there).
  if (ranks_ > 1) o_.comm->barrier();
  crash_point("checkpoint_saved");
  if (!writes) return;
  fs::path protect;
  if (o_.load_best && !st_.best_checkpoint.empty()) protect = o_.output / st_.best_checkpoint;
  prune_checkpoints(o_.output, o_.save_total_limit, protect);
}

std::optional<EvalMetrics> Trainer::maybe_eval() {
  if (!eval_ || eval_->empty()) return std::nullopt;
  int64_t longest = 0;
  for (const Example& e : *eval_) longest = std::max<int64_t>(longest, static_cast<int64_t>(e.ids.size()));
  const LoadedEncoder view = enc_.inference_view();
  EncoderRunner runner(view, backend_, longest * o_.batch_size, o_.batch_size, 3);
  EvalMetrics m = evaluate(runner, backend_, enc_.config, *eval_, o_.batch_size, regression_);
  ++report_.evals;
  return m;
}

TrainReport Trainer::run() {
  if (rank_ == 0) fs::create_directories(o_.output);
  // Batches of the global micro-batch size: the order a single process with
  // batch_size x ranks would see; each rank takes its fixed slice of each.
  const BatchOrderOptions order{o_.shuffle, o_.group_by_length, global_batch_, o_.seed};
  std::vector<std::vector<uint32_t>> batches = epoch_batches(lengths_, order, st_.epoch);
  Progress progress("training", static_cast<uint64_t>(total_steps_), !o_.quiet && rank_ == 0);
  progress.set_unit("samples");
  const uint64_t syncs0 = backend_.host_syncs(), throttles0 = backend_.throttle_waits();
  const double busy0 = backend_.busy_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  auto interval_start = t0;
  uint64_t interval_samples = 0, interval_tokens = 0;
  std::vector<int32_t> labels;
  std::vector<float> targets;
  std::vector<uint32_t> idx;
  // Dropout masks are keyed by the example's place in the global
  // micro-batch (its tokens and its row, MicroBatchKnobs' offsets), so each
  // rank draws, for its slice, the masks one process with the whole global
  // batch draws: the same seed everywhere.

  while (st_.step < total_steps_) {
    // One optimizer step: up to grad_accum micro-batches of this epoch.
    const int64_t first = st_.batch_in_epoch;
    const int64_t last = std::min<int64_t>(first + o_.grad_accum, static_cast<int64_t>(batches.size()));
    int64_t examples = 0;  // over every rank: the loss is their mean
    for (int64_t b = first; b < last; ++b) examples += static_cast<int64_t>(batches[static_cast<size_t>(b)].size());
    TraceSpan step_span(o_.trace, "enqueue step", "host");
    // A fault injected here (STOKE_FAIL_AT / STOKE_CRASH_AT=train_step:n) is
    // one rank failing mid-run, as an out-of-memory would: tests check that
    // the whole job ends, naming the rank.
    crash_point("train_step");
    optimizer_.zero_grad();
    for (int64_t b = first; b < last; ++b) {
      const std::vector<uint32_t>& global = batches[static_cast<size_t>(b)];
      const size_t begin = std::min(global.size(), static_cast<size_t>(rank_ * o_.batch_size));
      const size_t end = std::min(global.size(), begin + static_cast<size_t>(o_.batch_size));
      idx.assign(global.begin() + static_cast<long>(begin), global.begin() + static_cast<long>(end));
      uint64_t global_tokens = 0, tokens_before = 0;
      for (size_t j = 0; j < global.size(); ++j) {
        const uint64_t len = static_cast<uint64_t>(lengths_[global[j]]);
        global_tokens += len;
        if (j < begin) tokens_before += len;
      }
      MicroBatchKnobs k;
      k.dropout = o_.dropout;
      k.seed = o_.seed;
      // The slice packs right after the examples before it (pack_examples
      // adds tokens in order, no padding): its tokens and rows start there.
      k.token_offset = tokens_before;
      k.sequence_offset = begin;
      k.step = static_cast<uint32_t>(st_.micro_step++);
      k.label_smoothing = o_.label_smoothing;
      k.loss_scale = 1.0f / static_cast<float>(examples);
      k.regression = regression_;
      if (!idx.empty()) {
        const PackedBatch batch = pack_examples(train_, idx, enc_.config);
        labels.clear();
        targets.clear();
        for (uint32_t i : idx) {
          labels.push_back(train_[i].label);
          targets.push_back(train_[i].target);
        }
        // The last micro-batch's backward hands each finished layer to the all-reduce.
        if (reducer_ && b + 1 == last) runner_->set_backward_hook([this](int64_t l) { reducer_->layer_done(l); });
        runner_->enqueue(batch, labels, targets, k, TensorView(metrics_->data(), DType::f64, {3}));
        runner_->set_backward_hook(nullptr);
      }
      ++report_.micro_batches;
      st_.samples += global.size();
      st_.tokens += global_tokens;
      interval_samples += global.size();
      interval_tokens += global_tokens;
      report_.samples += global.size();
      report_.tokens += global_tokens;
    }
    if (reducer_) reducer_->finish_step();
    const double lr = lr_at(o_.lr, schedule_, st_.step);
    optimizer_.step(st_.step + 1, lr);
    ++st_.step;
    if (o_.debug_sync_each_step) {
      TraceSpan span(o_.trace, "debug sync", "sync");
      backend_.synchronize();
    }
    st_.batch_in_epoch = last;
    bool epoch_end = false;
    if (st_.batch_in_epoch >= static_cast<int64_t>(batches.size())) {
      epoch_end = true;
      ++st_.epoch;
      st_.batch_in_epoch = 0;
    }
    const bool final_step = st_.step == total_steps_;
    const double epoch_float = static_cast<double>(st_.epoch) +
                               static_cast<double>(st_.batch_in_epoch) / static_cast<double>(batches_per_epoch_);

    if (st_.step % o_.log_every == 0 || epoch_end || final_step) {
      if (st_.step % o_.log_every != 0 && !final_step) ++report_.extra_epoch_reads;
      double m[3];
      read_metrics(m);
      const double secs = seconds_since(interval_start);
      json line{{"step", st_.step}, {"epoch", epoch_float}, {"lr", lr}};
      if (m[2] > 0) {
        line["loss"] = m[0] / m[2];
        report_.last_loss = m[0] / m[2];
        if (!regression_) {
          line["accuracy"] = m[1] / m[2];
          report_.last_accuracy = m[1] / m[2];
        }
      }
      line["samples_per_s"] = secs > 0 ? static_cast<double>(interval_samples) / secs : 0.0;
      line["tokens_per_s"] = secs > 0 ? static_cast<double>(interval_tokens) / secs : 0.0;
      line["host_syncs"] = backend_.host_syncs() - syncs0;
      log(line);
      char note[64];
      std::snprintf(note, sizeof note, "loss %.4f", report_.last_loss);
      progress.set_note(note);
      interval_start = std::chrono::steady_clock::now();
      interval_samples = interval_tokens = 0;
    }
    // Every rank holds the same weights: rank 0 evaluates alone.
    const bool eval_now = rank_ == 0 && ((o_.eval_strategy == EvalStrategy::steps && st_.step % o_.eval_every == 0) ||
                                         (o_.eval_strategy == EvalStrategy::epoch && epoch_end));
    std::optional<EvalMetrics> ev;
    if (eval_now) {
      ev = maybe_eval();
      if (ev) {
        report_.last_eval = ev;
        json line{{"step", st_.step}, {"epoch", epoch_float}, {"eval_loss", ev->loss}};
        if (!regression_) {
          line["eval_accuracy"] = ev->accuracy;
          line["eval_macro_f1"] = ev->macro_f1;
        }
        line["eval_examples"] = ev->examples;
        log(line);
        if (o_.load_best) {
          const double v = metric_value(*ev);
          const bool higher = o_.metric != "eval_loss";
          if (!st_.best || (higher ? v > *st_.best : v < *st_.best)) {
            st_.best = v;
            st_.best_step = st_.step;
            st_.best_checkpoint = checkpoint_path(o_.output, st_.step).filename().string();
          }
        }
      }
    }
    // With --load-best every evaluation saves (the best must be on disk).
    const bool eval_step = (o_.eval_strategy == EvalStrategy::steps && st_.step % o_.eval_every == 0) ||
                           (o_.eval_strategy == EvalStrategy::epoch && epoch_end);
    const bool save_now = (o_.save_every > 0 && st_.step % o_.save_every == 0 && !final_step) ||
                          (o_.load_best && eval_step && !final_step);
    if (save_now) save(st_.step);
    if (epoch_end && !final_step) batches = epoch_batches(lengths_, order, st_.epoch);
    progress.update(st_.samples, static_cast<uint64_t>(st_.step), st_.tokens);
  }
  progress.finish();
  report_.train_seconds = seconds_since(t0);
  report_.steps = st_.step;
  report_.total_steps = total_steps_;
  report_.steps_per_epoch = steps_per_epoch_;
  report_.epochs_done = static_cast<double>(st_.epoch) +
                        static_cast<double>(st_.batch_in_epoch) / static_cast<double>(batches_per_epoch_);
  report_.host_syncs = backend_.host_syncs() - syncs0;
  report_.throttle_waits = backend_.throttle_waits() - throttles0;
  if (busy0 >= 0) report_.device_busy = backend_.busy_seconds() - busy0;
  report_.ranks = ranks_;
  report_.graphs = runner_->graph_stats();
  if (reducer_) report_.reduce = reducer_->stats();  // the executor is idle: the last step's metrics were read
  report_.best_metric = st_.best;
  report_.best_step = st_.best_step;
  return report_;
}

}  // namespace stoke::train
