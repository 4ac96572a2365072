// `stoke train`: fine-tune a sequence classifier from a Hugging Face model
// folder on labelled JSONL/CSV data, with checkpoints transformers can load,
// exact resume, a log history and a run record (run.json).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/trace.h"
#include "jobs/common_options.h"
#include "train/contrastive_data.h"
#include "train/schedule.h"
#include "train/trainer.h"

namespace stoke {

struct TrainOptions {
  CommonOptions common;              // --model, --text-field, --pair-field, --max-length, --device, --precision, ...
  std::string train;                 // --train FILE (required)
  std::string eval;                  // --eval FILE
  std::string output;                // --output DIR (required)
  std::string label_field = "label";
  // Embedding models (docs/training.md "Embedding models"): what is learned,
  // from which columns, with which loss settings.
  train::Objective objective = train::Objective::classify;  // --objective
  train::ContrastiveColumns columns;  // --anchor-field, --positive-field, --negative-fields, --score-field
  double scale = 20;                  // --scale: similarity x scale (mnrl kinds, cosent)
  bool dot_similarity = false;        // --similarity dot (default cosine)
  std::vector<int64_t> matryoshka_dims;     // --matryoshka-dims 768,512,...
  std::vector<double> matryoshka_weights;   // --matryoshka-weights 1,1,... (default all 1)
  int64_t mini_batch_tokens = 0;      // --mini-batch-tokens N (GradCache); 0: auto (the whole batch when it fits)
  int64_t epochs = 3;
  int64_t max_steps = 0;             // --max-steps N (>= 1) replaces --epochs; 0 = unset
  int64_t batch_size = 8;            // --batch-size N
  bool batch_size_auto = false;      // --batch-size auto: the largest that fits the memory budget
  int64_t max_batch_size = 256;      // --batch-size auto searches up to this
  std::optional<int64_t> memory_budget;  // --memory-budget 8G: bytes (unset: 80% of the device's free memory)
  int64_t grad_accum = 1;
  int64_t bucket_mb = 25;            // --bucket-mb: gradient all-reduce buckets (data-parallel runs)
  int64_t comm_timeout = 600;        // --comm-timeout: seconds before NCCL's watchdog aborts a stuck all-reduce
  double lr = 5e-5;
  int64_t lr_scale_from = 0;         // > 0: scale lr by effective batch / this
  train::LrScaling lr_scale = train::LrScaling::linear;  // --lr-scale linear|sqrt|none
  uint64_t seed = 42;
  bool no_shuffle = false;
  bool no_group_by_length = false;
  int64_t log_every = 500;
  std::optional<train::EvalStrategy> eval_strategy;  // unset: steps when --eval is given, else no
  int64_t eval_every = 0;            // 0 = --log-every
  int64_t save_every = 500;
  int64_t save_total_limit = 0;
  bool load_best = false;
  train::EvalMetric metric = train::EvalMetric::loss;  // --metric (for --load-best)
  bool resume = false;
  std::string resume_from;           // --resume CHECKPOINT ("" = the newest valid one in --output)
  bool overwrite = false;
  train::Schedule schedule = train::Schedule::linear;
  int64_t warmup_steps = 0;
  double warmup_ratio = 0;
  double weight_decay = 0;
  bool decay_all = false;
  double max_grad_norm = 1.0;
  double loss_scale_init = 65536;          // --precision f16: torch GradScaler's init_scale
  int64_t loss_scale_growth_interval = 2000;  // --precision f16: clean steps before the scale doubles
  std::optional<double> dropout;     // overrides the config's dropout probabilities
  double label_smoothing = 0;
  int64_t num_labels = 0;            // > 0: train a head with this many outputs
  bool new_labels = false;           // --new-labels: a fine-tuned model's labels may be replaced
  bool skip_bad_records = false;     // --on-error skip (stop: the default)
  bool debug_sync_each_step = false;  // --debug-sync-each-step: a host sync per step (for doctor's tests)
  bool no_graphs = false;             // --no-graphs: every micro-batch eagerly (CUDA; the CPU never captures)
  // Set by the CLI (core/stop_request.h): a stop saves the finished step's
  // checkpoint and ends the run (TrainSummary::stopped).
  const std::atomic<bool>* cancel = nullptr;
  // Set by doctor, not by flags.
  Trace* trace = nullptr;             // device spans and the host's step spans go here
  std::function<void(const std::string&)> on_thread_start;  // the host ("trainer") and device threads
};

// Step counts past any run's (RELIABILITY 16: a number from a user is bounded).
constexpr int64_t kMaxSteps = 1'000'000'000;
// The `uses` bit of the output folder's options (--output, --resume,
// --overwrite): under `stoke train` and `stoke doctor train`, not `stoke
// tune train`.
constexpr unsigned kTrainOutputOptions = 1u << 17;
// train's options, declared once (jobs/option_table.h): the common options
// it takes, then its own. The CLI and --config read it.
const OptionTable<TrainOptions>& train_option_table();

struct TrainSummary {
  std::string device, precision;
  int64_t steps = 0, total_steps = 0, batch_size = 0, grad_accum = 1;
  double base_lr = 0, lr = 0;
  double epochs = 0;
  uint64_t samples = 0, tokens = 0, examples = 0, eval_examples = 0, truncated = 0;
  double seconds = 0, samples_per_s = 0, tokens_per_s = 0;
  uint64_t host_syncs = 0, host_sync_bound = 0;
  double last_loss = 0, last_accuracy = 0;
  bool has_eval = false;
  double eval_loss = 0, eval_accuracy = 0, eval_macro_f1 = 0;
  std::vector<std::pair<std::string, double>> eval_named;  // an embedding model's evaluator metrics
  std::string resumed_from;
  std::vector<std::string> notes;    // label changes, fresh heads, batch size / lr choices
  std::string output;
  std::string gpu_report;            // "gpu: util ..." (jobs/gpu_usage.h); "" when not sampled
  std::vector<std::string> gemm_fallbacks;  // GEMMs on the plain kernel (jobs/gemm_fallback_report.h)
  // What doctor reads.
  double device_busy_seconds = -1;
  uint64_t expected_syncs = 0;        // log reads, evals, saves and the final model
  int64_t log_every = 0;
  bool native_bf16 = false;
  // Data parallelism (ranks > 1): this process's rank; rank 0 reports.
  int rank = 0, ranks = 1;
  int64_t global_batch = 0;           // batch_size x ranks x grad_accum
  int64_t bucket_mb = 25;
  double comm_seconds = 0, comm_exposed_seconds = 0;
  uint64_t allreduce_bytes_per_step = 0;
  // --precision f16: the dynamic loss scale at the end, and the steps it skipped.
  bool loss_scaling = false;
  double loss_scale = 0;
  int64_t skipped_steps = 0;
  bool stopped = false;               // a stop ended it at `steps`: checkpoint-<steps> is saved, no final model
};

TrainSummary run_train(const TrainOptions& options);

}  // namespace stoke
