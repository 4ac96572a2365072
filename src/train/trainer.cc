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
#include "train/classifier_task.h"
#include "train/micro_batch_split.h"

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

const char* eval_metric_name(EvalMetric m) {
  switch (m) {
    case EvalMetric::loss: return "eval_loss";
    case EvalMetric::accuracy: return "eval_accuracy";
    case EvalMetric::macro_f1: return "eval_macro_f1";
    case EvalMetric::cosine_ndcg_at_10: return "eval_cosine_ndcg@10";
    case EvalMetric::cosine_mrr_at_10: return "eval_cosine_mrr@10";
    case EvalMetric::cosine_map_at_100: return "eval_cosine_map@100";
    case EvalMetric::cosine_recall_at_10: return "eval_cosine_recall@10";
    case EvalMetric::cosine_accuracy_at_1: return "eval_cosine_accuracy@1";
    case EvalMetric::spearman_cosine: return "eval_spearman_cosine";
    case EvalMetric::pearson_cosine: return "eval_pearson_cosine";
  }
  return "eval_loss";
}

std::vector<TensorToWrite> SaveContext::frozen_tensors() const {
  std::vector<TensorToWrite> out;
  for (const Frozen& f : frozen)
    out.push_back({f.name, DType::f32, f.shape,
                   std::span<const std::byte>(reinterpret_cast<const std::byte*>(f.values.data()), f.values.size() * 4)});
  return out;
}

bool is_embedding_metric(EvalMetric m) {
  return m != EvalMetric::loss && m != EvalMetric::accuracy && m != EvalMetric::macro_f1;
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

namespace {

std::unique_ptr<TrainTask> classifier_task(TrainableEncoder& encoder, Backend& backend, const TrainerOptions& o,
                                           const std::vector<Example>& train, const std::vector<Example>* eval,
                                           bool regression) {
  ClassifierTaskOptions c;
  c.batch_size = o.batch_size;
  c.shuffle = o.shuffle;
  c.group_by_length = o.group_by_length;
  c.seed = o.seed;
  c.dropout = o.dropout;
  c.label_smoothing = o.label_smoothing;
  c.regression = regression;
  c.graphs = o.graphs && (!o.comm || o.comm->size() == 1);
  c.graph_shapes_without_capture = o.graph_shapes_without_capture;
  return std::make_unique<ClassifierTask>(encoder, backend, c, train, eval);
}

}  // namespace

Trainer::Trainer(TrainableEncoder& encoder, Backend& backend, const TrainerOptions& options,
                 const std::vector<Example>& train, const std::vector<Example>* eval, bool regression, SaveContext save)
    : Trainer(encoder, backend, options, classifier_task(encoder, backend, options, train, eval, regression),
              eval != nullptr, std::move(save)) {}

Trainer::Trainer(TrainableEncoder& encoder, Backend& backend, const TrainerOptions& options,
                 std::unique_ptr<TrainTask> task, bool has_eval, SaveContext save)
    : enc_(encoder),
      backend_(backend),
      o_(options),
      task_(std::move(task)),
      has_eval_(has_eval),
      save_ctx_(std::move(save)),
      optimizer_(encoder, backend, options.optim) {
  if (o_.batch_size <= 0) throw Error(Errc::invalid_argument, "--batch-size must be positive");
  if (o_.grad_accum <= 0) throw Error(Errc::invalid_argument, "--grad-accum must be positive");
  if (o_.log_every <= 0) throw Error(Errc::invalid_argument, "--log-every must be positive");
  if (o_.eval_strategy == EvalStrategy::steps && o_.eval_every <= 0)
    throw Error(Errc::invalid_argument, "--eval-every must be positive");
  accuracy_ = task_->reports_accuracy();
  if (o_.eval_strategy != EvalStrategy::no && !has_eval_)
    throw Error(Errc::invalid_argument, "--eval-strategy " + std::string(eval_strategy_name(o_.eval_strategy)) +
                                            " needs --eval FILE");
  if (o_.load_best && o_.eval_strategy == EvalStrategy::no)
    throw Error(Errc::invalid_argument, "--load-best needs evaluations (--eval FILE and --eval-strategy)");
  if (o_.comm) {
    rank_ = o_.comm->rank();
    ranks_ = o_.comm->size();
  }
  global_batch_ = o_.batch_size * ranks_;
  const int64_t n = static_cast<int64_t>(task_->examples());
  batches_per_epoch_ = (n + global_batch_ - 1) / global_batch_;
  steps_per_epoch_ = (batches_per_epoch_ + o_.grad_accum - 1) / o_.grad_accum;
  total_steps_ = o_.max_steps > 0 ? o_.max_steps : o_.epochs * steps_per_epoch_;
  if (total_steps_ <= 0) throw Error(Errc::invalid_argument, "nothing to train: 0 steps (--epochs / --max-steps)");
  schedule_.kind = o_.schedule;
  schedule_.total_steps = total_steps_;
  schedule_.warmup_steps = warmup_steps_for(total_steps_, o_.warmup_steps, o_.warmup_ratio);
  // The workspace (run() makes it, after any resume says how far an earlier
  // run halved the micro-batch) holds the longest possible micro-batch.
  if (ranks_ > 1)
    reducer_ = std::make_unique<GradientReducer>(enc_, backend_, *o_.comm, o_.bucket_bytes, o_.device_allreduce);
  metrics_ = backend_.allocate(3 * sizeof(double));
  zeros_ = backend_.allocate_host(3 * sizeof(double));
  metrics_at_step_ = backend_.allocate_host(3 * sizeof(double));
  std::memset(zeros_->data(), 0, 3 * sizeof(double));
  backend_.copy_to_device(metrics_->data(), zeros_->data(), 3 * sizeof(double));
  metrics_host_.assign(3, 0.0);
  scaler_host_.assign(Ops::LossScaler::kSlots, 0.0);
  report_.loss_scaling = o_.optim.loss_scaling;
  st_.scaler = initial_loss_scaler_state(o_.optim.scaler);
  optimizer_.set_graphs(o_.graphs && ranks_ == 1);
  optimizer_.set_step_values_on_device(o_.graph_shapes_without_capture);
}

Trainer::~Trainer() { backend_.drain(); }

json Trainer::state_json() const {
  json s;
  s["step"] = st_.step;
  s["epoch"] = st_.epoch;
  s["batch_in_epoch"] = st_.batch_in_epoch;
  s["micro_step"] = st_.micro_step;
  s["micro_batch_halvings"] = halvings_;  // a resume keeps the halved micro-batch (same sums, same bits)
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
  if (o_.optim.loss_scaling)
    s["loss_scaler"] = {{"scale", st_.scaler.scale},
                        {"growth_tracker", st_.scaler.growth_tracker},
                        {"skipped_steps", st_.scaler.skipped_steps},
                        {"optimizer_steps", st_.scaler.optimizer_steps}};
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
  halvings_ = s.value("micro_batch_halvings", 0);
  if (halvings_ < 0 || halvings_ > 62)
    throw Error(Errc::format, (checkpoint / "trainer_state.json").string() + ": micro_batch_halvings " +
                                  std::to_string(halvings_) + ": expected 0 to 62");
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
  if (o_.optim.loss_scaling) {  // the identity's precision matched: an f16 run's checkpoint has it
    if (!s.contains("loss_scaler"))
      throw Error(Errc::format, (checkpoint / "trainer_state.json").string() + ": no loss_scaler state (f16 training)");
    const json& ls = s["loss_scaler"];
    st_.scaler.scale = ls.at("scale").get<float>();
    st_.scaler.growth_tracker = ls.at("growth_tracker").get<int32_t>();
    st_.scaler.skipped_steps = ls.at("skipped_steps").get<int64_t>();
    st_.scaler.optimizer_steps = ls.at("optimizer_steps").get<int64_t>();
    optimizer_.load_scaler(st_.scaler);
    report_.scaler = st_.scaler;
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

void Trainer::enqueue_scaler_read() {
  if (o_.optim.loss_scaling) optimizer_.copy_scaler_to_host(scaler_host_.data());
}

void Trainer::take_scaler_read() {
  if (!o_.optim.loss_scaling) return;
  st_.scaler = loss_scaler_from_slots(scaler_host_.data());
  report_.scaler = st_.scaler;
}

void Trainer::read_metrics(double out[3]) {
  backend_.copy_to_host(metrics_host_.data(), metrics_->data(), 3 * sizeof(double));
  backend_.copy_to_device(metrics_->data(), zeros_->data(), 3 * sizeof(double));
  enqueue_scaler_read();  // the same wait reads it
  backend_.wait(*backend_.record_event());
  take_scaler_read();
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
  if (is_embedding_metric(o_.metric)) {
    const double* v = m.find(eval_metric_name(o_.metric) + 5);  // without "eval_"
    if (!v)
      throw Error(Errc::invalid_argument, std::string("--metric ") + eval_metric_name(o_.metric) +
                                              ": the evaluation set does not give it");
    return *v;
  }
  if (o_.metric == EvalMetric::accuracy) return m.accuracy;
  if (o_.metric == EvalMetric::macro_f1) return m.macro_f1;
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
  enqueue_scaler_read();  // the checkpoint's loss scaler: the same wait
  backend_.wait(*backend_.record_event());
  take_scaler_read();
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
    c.frozen = save_ctx_.frozen_tensors();
    c.text_files = save_ctx_.text_files;
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
  std::optional<EvalMetrics> m = task_->evaluate();
  if (m) ++report_.evals;
  return m;
}

void Trainer::make_workspace() {
  for (;;) {
    task_->release_workspace();  // the old workspace goes back before a smaller one is asked for
    try {
      task_->make_workspace(halvings_);
      workspace_ = true;
      return;
    } catch (const OutOfMemoryError& e) {
      task_->release_workspace();
      halve(e);
    }
  }
}

void Trainer::halve(const OutOfMemoryError& e) {
  if (ranks_ > 1) throw e;
  std::string why;
  if (!task_->can_halve(halvings_, &why)) throw Error(Errc::device, why + " (" + e.what() + ")");
  ++halvings_;
  ++report_.memory_halvings;
}

void Trainer::recover_from_oom(const OutOfMemoryError& e) {
  TraceSpan span(o_.trace, "out of memory: redo the step", "sync");
  backend_.synchronize();  // the interrupted step's enqueued work has run; rethrows a device error
  ++report_.memory_syncs;
  backend_.copy_to_device(metrics_->data(), metrics_at_step_->data(), 3 * sizeof(double));
  task_->release_workspace();
  halve(e);
  make_workspace();
}

void Trainer::enqueue_micro_batches(const std::vector<std::vector<uint32_t>>& batches, int64_t first, int64_t last,
                                    int64_t examples) {
  for (int64_t b = first; b < last; ++b) {
    MicroBatchPlace place;
    place.step = static_cast<uint32_t>(st_.micro_step++);
    place.rank = rank_;
    place.ranks = ranks_;
    place.batch_size = o_.batch_size;
    place.examples = examples;
    place.micro_batches = last - first;
    place.loss_scaler = optimizer_.loss_scaler();
    if (reducer_ && b + 1 == last) place.backward_hook = [this](int64_t l) { reducer_->layer_done(l); };
    task_->enqueue(batches[static_cast<size_t>(b)], place, TensorView(metrics_->data(), DType::f64, {3}));
  }
}

TrainReport Trainer::run() {
  if (rank_ == 0) fs::create_directories(o_.output);
  // Batches of the global micro-batch size: the order a single process with
  // batch_size x ranks would see; each rank takes its fixed slice of each.
  std::vector<std::vector<uint32_t>> batches = task_->epoch_batches(global_batch_, st_.epoch);
  Progress progress("training", static_cast<uint64_t>(total_steps_), !o_.quiet && rank_ == 0);
  progress.set_unit("samples");
  const uint64_t syncs0 = backend_.host_syncs(), throttles0 = backend_.throttle_waits();
  const double busy0 = backend_.busy_seconds();
  if (!workspace_) make_workspace();
  const auto t0 = std::chrono::steady_clock::now();
  auto interval_start = t0;
  uint64_t interval_samples = 0, interval_tokens = 0;

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
    // One process redoes a step that ran out of memory with halved chunks
    // (RELIABILITY 10): the metric sums as they were before it, the same
    // micro-step numbers (dropout keys), zeroed gradients. Ranks cannot redo
    // alone (the others are in the step's all-reduce): they fail together.
    const uint64_t micro_step0 = st_.micro_step;
    if (ranks_ == 1) backend_.copy_to_host(metrics_at_step_->data(), metrics_->data(), 3 * sizeof(double));
    for (;;) {
      try {
        st_.micro_step = micro_step0;
        optimizer_.zero_grad();
        enqueue_micro_batches(batches, first, last, examples);
        break;
      } catch (const OutOfMemoryError& e) {
        if (ranks_ > 1) throw;
        recover_from_oom(e);
      }
    }
    for (int64_t b = first; b < last; ++b) {
      const std::vector<uint32_t>& global = batches[static_cast<size_t>(b)];
      uint64_t global_tokens = 0;
      for (uint32_t i : global) global_tokens += task_->tokens_of(i);
      ++report_.micro_batches;
      st_.samples += global.size();
      st_.tokens += global_tokens;
      interval_samples += global.size();
      interval_tokens += global_tokens;
      report_.samples += global.size();
      report_.tokens += global_tokens;
    }
    if (reducer_) reducer_->finish_step();
    // The schedule counts every step, also one the f16 loss scaler skips (as
    // the plain PyTorch AMP loop calls scheduler.step() every iteration): the
    // host knows the lr without reading the device (docs/training.md).
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
        if (accuracy_) {
          line["accuracy"] = m[1] / m[2];
          report_.last_accuracy = m[1] / m[2];
        }
      }
      line["samples_per_s"] = secs > 0 ? static_cast<double>(interval_samples) / secs : 0.0;
      line["tokens_per_s"] = secs > 0 ? static_cast<double>(interval_tokens) / secs : 0.0;
      if (o_.optim.loss_scaling) {  // read with the metrics
        line["loss_scale"] = st_.scaler.scale;
        line["skipped_steps"] = st_.scaler.skipped_steps;
      }
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
        json line{{"step", st_.step}, {"epoch", epoch_float}};
        if (!ev->named.empty()) {
          for (const auto& [name, value] : ev->named) line["eval_" + name] = value;
        } else {
          line["eval_loss"] = ev->loss;
          if (accuracy_) {
            line["eval_accuracy"] = ev->accuracy;
            line["eval_macro_f1"] = ev->macro_f1;
          }
        }
        line["eval_examples"] = ev->examples;
        log(line);
        if (o_.load_best) {
          const double v = metric_value(*ev);
          const bool higher = o_.metric != EvalMetric::loss;
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
    if (epoch_end && !final_step) batches = task_->epoch_batches(global_batch_, st_.epoch);
    progress.update(st_.samples, static_cast<uint64_t>(st_.step), st_.tokens);
    if (!final_step && ranks_ == 1 && o_.cancel && o_.cancel->load(std::memory_order_relaxed)) {
      if (!save_now) save(st_.step);  // the step just finished, resumable exactly
      report_.stopped = true;
      break;
    }
  }
  progress.finish(!report_.stopped);
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
  report_.graphs = task_->graph_stats();
  report_.optimizer_graph = optimizer_.graph_stats();
  if (reducer_) report_.reduce = reducer_->stats();  // the executor is idle: the last step's metrics were read
  report_.micro_batch_halvings = halvings_;
  report_.micro_batch_examples = task_->piece(halvings_);
  report_.best_metric = st_.best;
  report_.best_step = st_.best_step;
  return report_;
}

}  // namespace stoke::train
