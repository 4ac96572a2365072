#include "apps/stoke/job_flags.h"

#include "apps/stoke/number_flags.h"
#include "apps/stoke/option_flags.h"

namespace stoke::cli {

void add_on_error_flags(CLI::App* cmd, std::string& on_error, std::string& errors) {
  cmd->add_option("--on-error", on_error,
                  "A bad record (invalid JSON/CSV, missing or non-string text): stop, or skip it (no output line) "
                  "and record its number and reason in the errors file");
  cmd->add_option("--errors", errors,
                  "Errors file for --on-error skip (default: OUTPUT.errors.jsonl; with --output -, one line per "
                  "skipped record on stderr)");
}

void add_common_flags(CLI::App* cmd, CommonOptions& o, unsigned use) {
  for (const Option<CommonOptions>& e : common_option_table())
    if ((e.offer & kOfferCli) && job_takes(e, use)) add_table_option(cmd, o, e);
}

void add_embed_flags(CLI::App* embed, EmbedCli& cli, const char* output_help) {
  const unsigned use = kEmbedFlags | (output_help ? kEmbedOutputOptions : 0u);
  CLI::Option *normalize = nullptr, *no_normalize = nullptr;
  for (const Option<EmbedOptions>& e : embed_option_table()) {
    if (!(e.offer & kOfferCli) || !job_takes(e, use)) continue;
    Option<EmbedOptions> entry = e;
    if (entry.flag == "--output") entry.help = output_help;  // what --output means under this command
    CLI::Option* opt = add_table_option(embed, cli.o, entry);
    if (entry.flag == "--normalize") normalize = opt;
    if (entry.flag == "--no-normalize") no_normalize = opt;
  }
  if (normalize && no_normalize) no_normalize->excludes(normalize);
}

void add_train_flags(CLI::App* train, TrainCli& cli, const char* output_help) {
  TrainOptions& trn = cli.o;
  add_common_flags(train, trn.common, kTrainFlags);
  train->add_option("--train,--input", trn.train,
                    "Training data: JSONL or CSV with text, optional text_pair, and label; required");
  train->add_option("--eval", trn.eval, "Evaluation data, same form (loss, accuracy, macro-F1 without gradients)");
  if (output_help) {
    train->add_option("--output", trn.output, output_help);
    train->add_option("--resume", cli.resume, "Continue from CHECKPOINT, or from the newest valid one in --output")
        ->expected(0, 1);
    train->add_flag("--overwrite", trn.overwrite, "Replace a training run already in --output");
  }
  train->add_option("--label-field", trn.label_field, "Field holding the label (integer id, name, or number for regression)");
  add_int(train, "--epochs", trn.epochs, {1, 1'000'000}, "Passes over the training data");
  add_int(train, "--max-steps", trn.max_steps, {1, kMaxSteps},
          "Optimizer steps in all, instead of --epochs (default: unset, --epochs decides)", false);
  train->add_option_function<std::string>(
           "--batch-size",
           [&trn](const std::string& text) {
             trn.batch_size = text == "auto" ? text : std::to_string(parse_int_flag(
                                                          "--batch-size", text, {1, 1 << 20, "or auto"}));
           },
           "Examples per micro-batch, or auto (largest that fits --memory-budget); 1 to 1048576 or auto")
      ->default_str(trn.batch_size);
  add_int(train, "--max-batch-size", trn.max_batch_size, {1, 1 << 20}, "Largest batch --batch-size auto tries");
  train->add_option("--memory-budget", trn.memory_budget, "Memory --batch-size auto may plan for, e.g. 8G (default: 80% of what the device says is free)");
  add_int(train, "--grad-accum", trn.grad_accum, {1, 1 << 16}, "Micro-batches per optimizer step");
  add_int(train, "--bucket-mb", trn.bucket_mb, {1, 1 << 16},
          "Data-parallel runs (mpirun/srun): MiB of gradients per all-reduce bucket");
  add_int(train, "--comm-timeout", trn.comm_timeout, {1, 1 << 20},
          "Data-parallel runs on CUDA: seconds an NCCL all-reduce may take before the job is aborted");
  add_real(train, "--lr", trn.lr, {0, 10, true}, "Peak learning rate (before --lr-scale-from)");
  add_int(train, "--lr-scale-from", trn.lr_scale_from, {0, 1 << 24},
          "Scale --lr by effective batch / B0 (linear scaling rule; 0: off)");
  train->add_option("--lr-scale", trn.lr_scale, "linear or sqrt (with --lr-scale-from)");
  add_int(train, "--seed", trn.seed, {0, INT64_MAX}, "Seed for shuffling, dropout masks and new heads");
  train->add_flag("--no-shuffle", trn.no_shuffle, "File order exactly, no regrouping");
  train->add_flag("--no-group-by-length", trn.no_group_by_length, "Shuffle without grouping similar lengths");
  add_int(train, "--log-every", trn.log_every, {1, kMaxSteps},
          "Read the loss from the device every K steps (one host sync each)");
  train->add_option("--eval-strategy", trn.eval_strategy, "steps, epoch or no (default: steps with --eval)");
  add_int(train, "--eval-every", trn.eval_every, {1, kMaxSteps}, "Evaluate every K steps (default: --log-every)",
          false);
  add_int(train, "--save-every", trn.save_every, {0, kMaxSteps}, "Checkpoint every K steps (0: only the final model)");
  add_int(train, "--save-total-limit", trn.save_total_limit, {0, 1'000'000}, "Keep the newest N checkpoints (0: all)");
  train->add_flag("--load-best", trn.load_best, "End with the weights of the best evaluation (--metric)");
  train->add_option("--metric", trn.metric, "eval_loss, eval_accuracy or eval_macro_f1 (for --load-best)");
  train->add_option("--schedule", trn.schedule, "linear, constant or cosine");
  add_int(train, "--warmup-steps", trn.warmup_steps, {0, kMaxSteps}, "Warmup steps (0: --warmup-ratio)");
  add_real(train, "--warmup-ratio", trn.warmup_ratio, {0, 1}, "Warmup as a fraction of all steps");
  add_real(train, "--weight-decay", trn.weight_decay, {0, 10}, "AdamW decoupled weight decay");
  train->add_flag("--decay-all", trn.decay_all, "Decay biases and LayerNorm weights too");
  add_real(train, "--max-grad-norm", trn.max_grad_norm, {0, 1e6}, "Clip the global gradient norm (0: no clipping)");
  add_real(train, "--loss-scale-init", trn.loss_scale_init, {0, 3.4e38, true},
           "--precision f16: the dynamic loss scale's first value (torch GradScaler's init_scale)");
  add_int(train, "--loss-scale-growth-interval", trn.loss_scale_growth_interval, {1, 1 << 30},
          "--precision f16: clean steps in a row before the loss scale doubles");
  add_real(train, "--dropout", cli.dropout, {0, 1, false, true},
           "Every dropout probability (default: the config's; 0 disables)", false);
  add_real(train, "--label-smoothing", trn.label_smoothing, {0, 1, false, true}, "Cross-entropy label smoothing");
  add_int(train, "--num-labels", trn.num_labels, {0, 1 << 20},
          "Outputs of the classification head (0: the model's; a new head when it changes)");
  train->add_flag("--new-labels", trn.new_labels, "Let labels outside a fine-tuned model's label names replace them (a new head)");
  train->add_option("--on-error", trn.on_error, "A bad record: stop, or skip it");
  train->add_flag("--no-graphs", trn.no_graphs,
                  "CUDA: enqueue every micro-batch eagerly (default: replay a graph per length bucket)");
  train->add_flag("--debug-sync-each-step", trn.debug_sync_each_step,
                  "Debugging: read from the device after every step (the mistake `stoke doctor` diagnoses)");
}

}  // namespace stoke::cli
