#include "apps/stoke/job_flags.h"

#include "apps/stoke/number_flags.h"

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
  cmd->add_option("--model", o.model,
                  "Hugging Face model folder (config.json, tokenizer files, weights), or a hub id ORG/NAME[@REVISION] "
                  "already in the local Hugging Face cache (never downloaded); required");
  if (use & kManyInputs)
    cmd->add_option("--input", o.inputs,
                    "Input: JSONL (one object per line), CSV or TSV (a header row naming the columns) or plain text "
                    "(one text per line); - reads stdin (the default when stdin is not a terminal). Several files "
                    "(repeat the flag or list them), a folder (its files) or a quoted pattern ('parts/*.jsonl') read "
                    "as one input, in sorted name order")
        ->expected(1, -1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  else if (use & kInput)
    cmd->add_option("--input", o.input,
                    "Input file: JSONL (one object per line), CSV or TSV (a header row naming the columns) or plain "
                    "text (one text per line); - reads stdin (the default when stdin is not a terminal)");
  cmd->add_option("--input-format", o.input_format,
                  "jsonl, csv, tsv or text (default: from the file name: .csv, .tsv, .txt, else JSONL)");
  cmd->add_option("--text-field", o.text_field, "Field holding the text");
  if (use & kPairField)
    cmd->add_option("--pair-field", o.pair_field, "Field holding the second text of a pair (optional per record)");
  if (use & kIdField)
    cmd->add_option("--id-field", o.id_field,
                    "Field holding the record id (default: the 0-based record number; tokenize adds \"id\" when given)");
  add_int(cmd, "--max-length", o.max_length, {1, 1 << 20},
          "Max tokens per sequence, specials included (default: sentence_bert_config max_seq_length, "
          "else tokenizer model_max_length, else the model's usable positions)");
  if (use & kDevice) {
    cmd->add_option("--device", o.device, "auto, cpu, cuda or cuda:N");
    cmd->add_option("--precision", o.precision, "f32, bf16, f16 or int8 (embed and classify on the CPU)");
  }
  if (use & kWorkers)
    add_int(cmd, "--workers", o.workers, {0, max_workers(), max_workers_reason()},
            "Tokenizer threads (0: the job's default)");
  if (use & kBatchTokens)
    add_int(cmd, "--batch-tokens", o.batch_tokens, {1, 1 << 24}, "Tokens per batch (token budget)");
  cmd->add_option("--trace", o.trace, "Write a Chrome trace-event JSON timeline here");
  cmd->add_flag("--quiet", o.quiet, "No progress bar and no summary");
  cmd->add_option("--config", o.config, "JSON object of flag: value (e.g. from `stoke tune`); command-line flags win");
}

void add_embed_flags(CLI::App* embed, EmbedCli& cli, const char* output_help) {
  EmbedOptions& emb = cli.o;
  add_common_flags(embed, emb.common, kEmbedFlags);
  if (output_help) {
    embed->add_option("--output", emb.output, output_help);
    embed->add_flag("--overwrite", emb.overwrite, "Replace output already in the folder");
    embed->add_flag("--resume", emb.resume,
                    "Continue the job whose manifest is in the output folder (a fresh start when there is none; "
                    "needs a regular --input file)");
    // Under embed and doctor embed; `stoke tune embed` has its own (the gate of its int8 trial).
    add_real(embed, "--min-centered-cosine", emb.min_centered_cosine, {-1, 1},
             "--precision int8 measures itself against f32 on the first texts and warns below this mean "
             "cosine (after removing the mean vector)");
  }
  embed->add_option("--pooling", emb.pooling,
                    "cls, mean, max, mean_sqrt_len or lasttoken (default: the model's sentence-transformers pooling, else mean)");
  auto* norm_flag = embed->add_flag("--normalize", cli.normalize, "L2-normalize the vectors (default: as the model's modules.json says)");
  embed->add_flag("--no-normalize", cli.no_normalize, "Do not normalize")->excludes(norm_flag);
  add_int(embed, "--dimensions", emb.dimensions, {0, 1 << 20},
          "Keep the first D dimensions after normalizing (Matryoshka; 0: all)");
  embed->add_option("--prompt", emb.prompt, "Text put before every input (e.g. \"query: \")");
  embed->add_option("--prompt-name", emb.prompt_name, "A prompt by name from config_sentence_transformers.json");
  embed->add_option("--output-dtype", emb.output_dtype, "f32 or f16 (.npy element type)");
  add_int(embed, "--max-batch-size", emb.max_batch_size, {1, 1 << 20}, "Sequences per batch at most");
  embed->add_option("--on-error", emb.on_error,
                    "A bad record (invalid JSON/CSV, missing or non-string text): stop, or skip it into "
                    "OUT_DIR/errors.jsonl");
  add_int(embed, "--sort-window", emb.sort_window, {1, 1 << 24},
          "Records sorted by length together (memory vs padding-free batches)");
  add_int(embed, "--shard-size", emb.shard_size, {1, 100'000'000},
          "Rows per embeddings-NNNNN.npy shard (the unit of a commit)");
  // A number, or auto: both from the scheduler's environment (jobs/task_environment.h).
  embed->add_option_function<std::string>(
           "--shard-index",
           [&emb](const std::string& text) {
             emb.shard_index_auto = text == "auto";
             if (!emb.shard_index_auto)
               emb.shard_index = static_cast<uint64_t>(parse_int_flag("--shard-index", text, {0, kMaxTasks - 1, "or auto"}));
           },
           "This task's index i, below --num-shards: it embeds records r with r mod N == i; auto (with --num-shards "
           "auto): from a Slurm job array (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) or a Kubernetes indexed Job "
           "(JOB_COMPLETION_INDEX) (0 to " + std::to_string(kMaxTasks - 1) + ", or auto)")
      ->type_name("INT|auto")
      ->default_str(std::to_string(emb.shard_index));
  embed->add_option_function<std::string>(
           "--num-shards",
           [&emb](const std::string& text) {
             emb.num_shards_auto = text == "auto";
             if (!emb.num_shards_auto)
               emb.num_shards = static_cast<uint64_t>(parse_int_flag("--num-shards", text, {1, kMaxTasks, "or auto"}));
           },
           "Number of tasks N the input is split into (job arrays); auto (with --shard-index auto): "
           "SLURM_ARRAY_TASK_COUNT, or STOKE_NUM_TASKS in a Kubernetes indexed Job (1 to " +
               std::to_string(kMaxTasks) + ", or auto)")
      ->type_name("INT|auto")
      ->default_str(std::to_string(emb.num_shards));
  embed->add_option("--partition", emb.partition,
                    "How --num-shards splits the input: records (record r to task r mod N; every task reads the whole "
                    "input) or files (input file f, in sorted order, to task f mod N; a task reads only its files)");
  embed->add_flag("--serial", emb.serial,
                  "Run the stages one after another (read, tokenize, compute, write): the loop the pipeline replaces, "
                  "for comparison");
  embed->add_flag("--debug-sync-each-batch", emb.debug_sync_each_batch,
                  "Debugging: wait for the device after every batch (the mistake `stoke doctor` diagnoses)");
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
