// The training loop: optimizer steps over length-grouped batches with no host
// read inside a step. The host reads the device only at logging steps (the
// loss/accuracy sums), evaluations (one wait each), checkpoint saves (the
// parameters and moments), and the end — the run report's host_syncs counts
// exactly these.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/trace.h"
#include "dist/communicator.h"
#include "model/encoder_training.h"
#include "model/trainable_encoder.h"
#include "train/batch_order.h"
#include "train/evaluate.h"
#include "train/gradient_reducer.h"
#include "train/optimizer.h"
#include "train/schedule.h"
#include "train/train_data.h"
#include "train/train_task.h"

namespace stoke::train {

enum class EvalStrategy { no, steps, epoch };
// What --load-best compares, as HF's metric_for_best_model names it. The
// first three are the classifier's; the rest an embedding model's
// evaluators' (sentence-transformers' names; higher is better).
enum class EvalMetric {
  loss, accuracy, macro_f1,
  cosine_ndcg_at_10, cosine_mrr_at_10, cosine_map_at_100, cosine_recall_at_10, cosine_accuracy_at_1,
  spearman_cosine, pearson_cosine
};
// "eval_loss", "eval_accuracy", "eval_macro_f1", "eval_cosine_ndcg@10", ...
const char* eval_metric_name(EvalMetric m);
// An embedding evaluator's metric (not the classifier's three).
bool is_embedding_metric(EvalMetric m);
inline constexpr EvalMetric kEvalMetrics[] = {
    EvalMetric::loss, EvalMetric::accuracy, EvalMetric::macro_f1, EvalMetric::cosine_ndcg_at_10,
    EvalMetric::cosine_mrr_at_10, EvalMetric::cosine_map_at_100, EvalMetric::cosine_recall_at_10,
    EvalMetric::cosine_accuracy_at_1, EvalMetric::spearman_cosine, EvalMetric::pearson_cosine};

struct TrainerOptions {
  std::filesystem::path output;
  int64_t epochs = 3;
  int64_t max_steps = 0;   // > 0: overrides epochs
  int64_t batch_size = 8;  // per rank: the global batch is batch_size x ranks x grad_accum
  int64_t grad_accum = 1;
  double lr = 5e-5;        // effective (after any batch scaling)
  Schedule schedule = Schedule::linear;
  int64_t warmup_steps = 0;
  double warmup_ratio = 0;
  uint64_t seed = 42;
  bool shuffle = true, group_by_length = true;
  int64_t log_every = 500;
  EvalStrategy eval_strategy = EvalStrategy::no;
  int64_t eval_every = 500;
  int64_t save_every = 500;     // 0: no intermediate checkpoints
  int64_t save_total_limit = 0; // 0: keep all
  bool load_best = false;
  EvalMetric metric = EvalMetric::loss;  // for load_best
  DropoutRates dropout;
  float label_smoothing = 0;
  OptimizerOptions optim;
  bool quiet = false;
  bool debug_sync_each_step = false;  // a host sync after every step (doctor's sync-bound test)
  // A stop (core/stop_request.h): read after each step (a relaxed load, no
  // host sync); the run saves a checkpoint of the step it finished and ends,
  // TrainReport::stopped. One process only: ranks would see it at different
  // steps and wait on each other's all-reduce, so a data-parallel run is
  // ended by the stop timeout and resumes from its last checkpoint.
  const std::atomic<bool>* cancel = nullptr;
  // CUDA graphs of the encoder forward and backward per length bucket
  // (EncoderTrainingRunner::set_graphs) and of the optimizer step
  // (Optimizer::set_graphs); one process only: a data-parallel rank's
  // backward hands layers to the all-reduce as they finish
  // (docs/training.md "Graphs" says why that stays eager).
  bool graphs = true;
  // Tests: what the graphs would record, enqueued eagerly on any backend
  // (the padded micro-batches, t and lr from device memory): how the CPU
  // proves a graphed run equals the eager one, resume included.
  bool graph_shapes_without_capture = false;
  Trace* trace = nullptr;             // host spans: "step" (enqueueing one optimizer step)
  // Data parallelism: each rank takes a fixed slice of every global
  // micro-batch, gradients are summed over the ranks before each optimizer
  // step, and rank 0 alone writes the log and checkpoints. nullptr: one process.
  dist::Communicator* comm = nullptr;
  DeviceAllReduce* device_allreduce = nullptr;  // the gradient sums on a GPU (NCCL); null: on the executor
  int64_t bucket_bytes = 25 << 20;    // all-reduce buckets (--bucket-mb)
  // Everything that must match for a resume (the job fills it).
  nlohmann::json identity;
};

// What a checkpoint needs besides the device state (the job provides it).
struct SaveContext {
  std::string config_json;
  std::vector<std::filesystem::path> tokenizer_files;
  std::vector<std::pair<std::string, std::filesystem::path>> extra_files;  // CheckpointContents::extra_files
  std::vector<std::pair<std::string, std::string>> text_files;            // CheckpointContents::text_files
  // Tensors saved as they are (CheckpointContents::frozen): names, shapes, f32 values.
  struct Frozen {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> values;
  };
  std::vector<Frozen> frozen;
  std::vector<TensorToWrite> frozen_tensors() const;  // views of `frozen`
};

struct TrainReport {
  int64_t steps = 0, total_steps = 0, steps_per_epoch = 0;
  int64_t micro_batches = 0;
  double epochs_done = 0;
  uint64_t samples = 0, tokens = 0;   // this run (after any resume)
  double train_seconds = 0;
  uint64_t host_syncs = 0, throttle_waits = 0, saves = 0, evals = 0, log_reads = 0;
  uint64_t extra_epoch_reads = 0;  // metric reads at epoch ends that were not log steps or the last step
  double device_busy = -1;
  double last_loss = 0, last_accuracy = 0;
  std::optional<EvalMetrics> last_eval;
  bool stopped = false;               // TrainerOptions::cancel ended it: the last checkpoint is its step
  std::optional<double> best_metric;
  int64_t best_step = 0;
  int64_t resumed_from_step = 0;      // 0: a fresh run
  // Out of memory (RELIABILITY 10): micro-batches run as chunks of
  // micro_batch_examples after micro_batch_halvings halvings (those of a
  // resumed checkpoint's run included); memory_halvings of them happened in
  // this run, each after a host sync (memory_syncs) that let the interrupted
  // step's work finish before it was redone.
  int micro_batch_halvings = 0, memory_halvings = 0;
  int64_t micro_batch_examples = 0;
  uint64_t memory_syncs = 0;
  std::string resumed_from;
  int ranks = 1;
  ReduceStats reduce;                 // ranks > 1
  // f16's loss scaler, as last read (at the last log step: the run's end).
  bool loss_scaling = false;
  LossScalerState scaler;
  EncoderTrainingRunner::GraphStats graphs;
  Optimizer::GraphStats optimizer_graph;
};

class Trainer {
 public:
  // A sequence classifier (train/classifier_task.h) on labelled examples.
  Trainer(TrainableEncoder& encoder, Backend& backend, const TrainerOptions& options,
          const std::vector<Example>& train, const std::vector<Example>* eval, bool regression, SaveContext save);
  // Any training task (train/train_task.h); `has_eval`: the task has an evaluation set.
  Trainer(TrainableEncoder& encoder, Backend& backend, const TrainerOptions& options, std::unique_ptr<TrainTask> task,
          bool has_eval, SaveContext save);
  // Drains the backend first: copies enqueued into the trainer's buffers may
  // not have run yet (a resume refused right after construction).
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Restores device and loop state from a checkpoint folder (already verified).
  void resume_from(const std::filesystem::path& checkpoint);
  TrainReport run();

  int64_t total_steps() const { return total_steps_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }

 private:
  struct State {
    int64_t step = 0, epoch = 0, batch_in_epoch = 0;
    uint64_t micro_step = 0;
    double metrics[3] = {0, 0, 0};  // read but not yet logged
    uint64_t samples = 0, tokens = 0;
    std::optional<double> best;
    int64_t best_step = 0;
    std::string best_checkpoint;
    LossScalerState scaler;  // loss scaling: the device state as last read (for the checkpoint)
  };
  nlohmann::json state_json() const;
  void read_metrics(double out[3]);  // one host sync; zeroes the device sums; summed over the ranks
  void enqueue_scaler_read();        // with loss scaling: the scaler's state, read by the next wait
  void take_scaler_read();           // after that wait: st_.scaler and the report
  void sum_over_ranks(double m[3]);
  void log(const nlohmann::json& line);
  void save(int64_t step);
  std::optional<EvalMetrics> maybe_eval();
  double metric_value(const EvalMetrics& m) const;
  // The workspace for the current split; out of memory halves the split
  // until it fits (throws when the smallest does not).
  void make_workspace();
  void halve(const OutOfMemoryError& e);
  // Enqueues micro-batches [first, last) of `batches` (forward, loss, backward
  // into the gradient buffer).
  void enqueue_micro_batches(const std::vector<std::vector<uint32_t>>& batches, int64_t first, int64_t last,
                             int64_t examples);
  // An out-of-memory inside a step: let its enqueued work finish (a host
  // sync), put back the metric sums it added, halve, and make the smaller
  // workspace; the caller then redoes the step from zeroed gradients.
  void recover_from_oom(const OutOfMemoryError& e);

  TrainableEncoder& enc_;
  Backend& backend_;
  TrainerOptions o_;
  std::unique_ptr<TrainTask> task_;
  bool has_eval_ = false;
  bool accuracy_ = true;   // the task's metrics[1] is an accuracy
  bool workspace_ = false; // made
  SaveContext save_ctx_;
  int64_t batches_per_epoch_ = 0, steps_per_epoch_ = 0, total_steps_ = 0;
  int halvings_ = 0;       // the task's micro-batches split this many times
  ScheduleConfig schedule_;
  Optimizer optimizer_;
  std::unique_ptr<Buffer> metrics_, zeros_;
  std::unique_ptr<Buffer> metrics_at_step_;  // host copy of metrics_ at each step's start (what an OOM restores)
  State st_;
  TrainReport report_;
  std::vector<double> metrics_host_;
  std::vector<double> scaler_host_;  // Ops::LossScaler::kSlots
  std::string resumed_from_;
  int rank_ = 0, ranks_ = 1;
  int64_t global_batch_ = 0;  // examples per global micro-batch: batch_size x ranks
  std::unique_ptr<GradientReducer> reducer_;
};

const char* eval_strategy_name(EvalStrategy s);
EvalStrategy eval_strategy_from_name(const std::string& name);

}  // namespace stoke::train
