// The stoke command line: parses flags, calls one job function, and turns any
// error into one clear line on stderr and exit status 1. No job logic here.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "apps/stoke/config_json.h"
#include "apps/stoke/number_flags.h"
#include "core/error.h"
#include "jobs/classify_job.h"
#include "jobs/common_options.h"
#include "jobs/doctor_job.h"
#include "jobs/embed_job.h"
#include "jobs/inspect_job.h"
#include "jobs/tokenize_job.h"
#include "jobs/tune_job.h"
#include "jobs/train_job.h"
#include "jobs/verify_job.h"
#include "jobs/version.h"
#include "text/tokenizer.h"

namespace {

using stoke::CommonOptions;

constexpr int64_t kMaxTasks = 1'000'000;        // --num-shards: a job array larger than any scheduler runs
constexpr int64_t kMaxSteps = 1'000'000'000;    // train's step counts

// --on-error and --errors of the jobs that write one output file (tokenize,
// classify): a skipped record's number and reason go to the errors file.
void add_on_error_flags(CLI::App* cmd, std::string& on_error, std::string& errors) {
  cmd->add_option("--on-error", on_error,
                  "A bad record (invalid JSON/CSV, missing or non-string text): stop, or skip it (no output line) "
                  "and record its number and reason in the errors file");
  cmd->add_option("--errors", errors,
                  "Errors file for --on-error skip (default: OUTPUT.errors.jsonl; with --output -, one line per "
                  "skipped record on stderr)");
}

// The flags every job that reads texts shares (DESIGN conventions) — only
// those the job uses: a job neither lists nor accepts a flag it ignores.
enum CommonFlag : unsigned {
  kInput = 1,         // --input (train reads --train, with --input as its alias)
  kPairField = 2,     // embed never reads pairs
  kIdField = 4,       // train has no ids
  kDevice = 8,        // --device and --precision (tokenize runs no model)
  kBatchTokens = 16,  // the pipeline's token budget (embed, classify)
  kWorkers = 32,      // tokenizer threads
};
constexpr unsigned kTokenizeFlags = kInput | kPairField | kIdField | kWorkers;
constexpr unsigned kEmbedFlags = kInput | kIdField | kDevice | kBatchTokens | kWorkers;
constexpr unsigned kClassifyFlags = kInput | kPairField | kIdField | kDevice | kBatchTokens | kWorkers;
constexpr unsigned kTrainFlags = kPairField | kDevice | kWorkers;

void add_common_flags(CLI::App* cmd, CommonOptions& o, unsigned use) {
  using stoke::cli::add_int;
  cmd->add_option("--model", o.model,
                  "Hugging Face model folder (config.json, tokenizer files, weights), or a hub id ORG/NAME[@REVISION] "
                  "already in the local Hugging Face cache (never downloaded); required");
  if (use & kInput)
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
    cmd->add_option("--precision", o.precision, "f32, bf16 or f16");
  }
  if (use & kWorkers)
    add_int(cmd, "--workers", o.workers, {0, stoke::max_workers(), stoke::max_workers_reason()},
            "Tokenizer threads (0: the job's default)");
  if (use & kBatchTokens)
    add_int(cmd, "--batch-tokens", o.batch_tokens, {1, 1 << 24}, "Tokens per batch (token budget)");
  cmd->add_option("--trace", o.trace, "Write a Chrome trace-event JSON timeline here");
  cmd->add_flag("--quiet", o.quiet, "No progress bar and no summary");
  cmd->add_option("--config", o.config, "JSON object of flag: value (e.g. from `stoke tune`); command-line flags win");
}

// `stoke embed`'s flags (also under `stoke doctor embed` and `stoke tune embed`).
struct EmbedCli {
  stoke::EmbedOptions o;
  bool normalize = false, no_normalize = false;
  void finish() {
    if (normalize) o.normalize = true;
    if (no_normalize) o.normalize = false;
  }
};

// output_help: what --output means under this command (required for embed
// itself; optional under doctor); nullptr: no output flags at all (tune
// writes its trials to temporary folders).
void add_embed_flags(CLI::App* embed, EmbedCli& cli, const char* output_help) {
  using stoke::cli::add_int;
  stoke::EmbedOptions& emb = cli.o;
  add_common_flags(embed, emb.common, kEmbedFlags);
  if (output_help) {
    embed->add_option("--output", emb.output, output_help);
    embed->add_flag("--overwrite", emb.overwrite, "Replace output already in the folder");
    embed->add_flag("--resume", emb.resume,
                    "Continue the job whose manifest is in the output folder (a fresh start when there is none; "
                    "needs a regular --input file)");
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
  add_int(embed, "--shard-index", emb.shard_index, {0, kMaxTasks - 1},
          "This task's index i, below --num-shards: it embeds records r with r mod N == i");
  add_int(embed, "--num-shards", emb.num_shards, {1, kMaxTasks}, "Number of tasks N the input is split into (job arrays)");
  embed->add_flag("--serial", emb.serial,
                  "Run the stages one after another (read, tokenize, compute, write): the loop the pipeline replaces, "
                  "for comparison");
  embed->add_flag("--debug-sync-each-batch", emb.debug_sync_each_batch,
                  "Debugging: wait for the device after every batch (the mistake `stoke doctor` diagnoses)");
}

// `stoke train`'s flags (also under `stoke doctor train`).
struct TrainCli {
  stoke::TrainOptions o;
  double dropout = -1;
  std::string resume;
  void finish(CLI::App* cmd) {
    if (const CLI::Option* r = cmd->get_option_no_throw("--resume"); r && r->count() > 0) {  // tune has none
      o.resume = true;
      o.resume_from = resume;
    }
    if (cmd->count("--dropout") > 0) o.dropout = dropout;
  }
};

// output_help as for add_embed_flags.
void add_train_flags(CLI::App* train, TrainCli& cli, const char* output_help) {
  using stoke::cli::add_int;
  using stoke::cli::add_real;
  stoke::TrainOptions& trn = cli.o;
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
             trn.batch_size = text == "auto" ? text : std::to_string(stoke::cli::parse_int_flag(
                                                          "--batch-size", text, {1, 1 << 20, "or auto"}));
           },
           "Examples per micro-batch, or auto (largest that fits --memory-budget); 1 to 1048576 or auto")
      ->default_str(trn.batch_size);
  add_int(train, "--max-batch-size", trn.max_batch_size, {1, 1 << 20}, "Largest batch --batch-size auto tries");
  train->add_option("--memory-budget", trn.memory_budget, "Memory --batch-size auto may plan for, e.g. 8G (default: 80% of available)");
  add_int(train, "--grad-accum", trn.grad_accum, {1, 1 << 16}, "Micro-batches per optimizer step");
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
  add_real(train, "--dropout", cli.dropout, {0, 1, false, true},
           "Every dropout probability (default: the config's; 0 disables)", false);
  add_real(train, "--label-smoothing", trn.label_smoothing, {0, 1, false, true}, "Cross-entropy label smoothing");
  add_int(train, "--num-labels", trn.num_labels, {0, 1 << 20},
          "Outputs of the classification head (0: the model's; a new head when it changes)");
  train->add_flag("--new-labels", trn.new_labels, "Let labels outside a fine-tuned model's label names replace them (a new head)");
  train->add_option("--on-error", trn.on_error, "A bad record: stop, or skip it");
  train->add_flag("--debug-sync-each-step", trn.debug_sync_each_step,
                  "Debugging: read from the device after every step (the mistake `stoke doctor` diagnoses)");
}

std::string count_of(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// An input without a single record is almost always a mistake (a wrong file,
// an empty pipe): said even with --quiet, though the run itself succeeds.
void warn_if_empty(uint64_t records, const std::string& input) {
  if (records == 0)
    std::fprintf(stderr, "stoke: warning: %s holds no records: nothing was done\n",
                 input == "-" ? "stdin" : input.c_str());
}

std::string per_second(double n, double secs) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", secs > 0 ? n / secs : 0.0);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stoke: keeps the accelerator fed while BERT-family models embed, classify and fine-tune", "stoke"};
  app.option_defaults()->always_capture_default();
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("stoke ") + stoke::stoke_version());
  app.footer("Run `stoke <command> --help` for a command's flags and their defaults.");

  // tokenize
  stoke::TokenizeOptions tok;
  CLI::App* tokenize = app.add_subcommand("tokenize", "Token ids for every input record, as Hugging Face gives them");
  add_common_flags(tokenize, tok.common, kTokenizeFlags);
  tokenize->add_option("--output", tok.output, "Output JSONL ({\"ids\", \"tokens\"[, \"type_ids\"]} per record); - is stdout");
  tokenize->add_flag("--no-truncation", tok.no_truncation, "Keep every token even past the max length");
  add_on_error_flags(tokenize, tok.on_error, tok.errors);

  // embed
  EmbedCli emb;
  CLI::App* embed = app.add_subcommand("embed", "Sentence embeddings for every input record, as .npy files + a manifest");
  add_embed_flags(embed, emb, "Output folder (manifest.json, embeddings-NNNNN.npy, ids-NNNNN.jsonl); required");

  // classify
  stoke::ClassifyOptions cls;
  CLI::App* classify = app.add_subcommand("classify", "Classifier logits, label and score for every input record (pairs: cross-encoder)");
  add_common_flags(classify, cls.common, kClassifyFlags);
  classify->add_option("--output", cls.output, "Output JSONL, one line per input record; - is stdout");
  stoke::cli::add_int(classify, "--max-batch-size", cls.max_batch_size, {1, 1 << 20}, "Sequences per batch at most");
  add_on_error_flags(classify, cls.on_error, cls.errors);

  // train
  TrainCli trn;
  CLI::App* train = app.add_subcommand("train", "Fine-tune a sequence classifier; checkpoints load in transformers");
  add_train_flags(train, trn, "Output folder: checkpoint-STEP/, the final model, log.jsonl, run.json; required");

  // doctor
  stoke::DoctorOptions doc;
  EmbedCli doc_emb;
  TrainCli doc_trn;
  CLI::App* doctor = app.add_subcommand("doctor", "Say why the device is idle: profile a short run (or read a trace) and "
                                                  "name what bounds it, with evidence and advice");
  doctor->add_option("--trace", doc.trace_in, "Diagnose a trace a run wrote (stoke embed/train --trace FILE)");
  doctor->add_option("--html", doc.html, "Also write a self-contained HTML report (timeline, per-stage bars)");
  CLI::App* doctor_embed = doctor->add_subcommand("embed", "Profile `stoke embed` with these flags");
  add_embed_flags(doctor_embed, doc_emb,
                  "Output folder for the profiled run (default: a temporary folder, removed after --seconds)");
  stoke::cli::add_real(doctor_embed, "--seconds", doc.seconds, {0, 86400, true},
                       "Read records for this long (into a temporary output; with --output the whole run is profiled)");
  doctor_embed->add_option("--html", doc.html, "Also write a self-contained HTML report");
  CLI::App* doctor_train = doctor->add_subcommand("train", "Profile `stoke train` with these flags");
  add_train_flags(doctor_train, doc_trn, "Output folder of the profiled run (default: a temporary folder)");
  stoke::cli::add_int(doctor_train, "--steps", doc.steps, {1, 1'000'000},
                      "Optimizer steps to profile when --max-steps is not given");
  doctor_train->add_option("--html", doc.html, "Also write a self-contained HTML report");
  doctor->require_subcommand(0, 1);

  // tune
  stoke::TuneOptions tun;
  EmbedCli tun_emb;
  CLI::App* tune = app.add_subcommand("tune", "Find faster settings: short trials, one knob at a time, written as a --config file");
  CLI::App* tune_embed = tune->add_subcommand("embed", "Tune `stoke embed` starting from these flags");
  add_embed_flags(tune_embed, tun_emb, nullptr);
  stoke::cli::add_real(tune_embed, "--seconds-per-trial", tun.seconds_per_trial, {0, 3600, true},
                       "How long each trial reads records");
  tune_embed->add_option("--write-config", tun.write_config, "Write the winning settings to FILE (a --config file); without it they are only printed");
  stoke::cli::add_real(tune_embed, "--min-cosine", tun.min_cosine, {-1, 1},
                       "A lower precision is taken only if every embedding keeps this cosine to f32's");
  stoke::cli::add_int(tune_embed, "--max-workers", tun.max_workers,
                      {0, stoke::max_workers(), stoke::max_workers_reason()},
                      "Most tokenizer workers to try (0: the cores)");
  stoke::TuneTrainOptions tun_train;
  TrainCli tun_trn;
  CLI::App* tune_train = tune->add_subcommand("train", "Tune `stoke train` starting from these flags");
  add_train_flags(tune_train, tun_trn, nullptr);
  stoke::cli::add_int(tune_train, "--steps-per-trial", tun_train.steps_per_trial, {1, 1'000'000},
                      "Optimizer steps each trial runs");
  tune_train->add_option("--write-config", tun_train.write_config, "Write the winning settings to FILE (a --config file); without it they are only printed");
  stoke::cli::add_real(tune_train, "--max-loss-change", tun_train.max_loss_change, {0, 1000},
                       "bf16 is taken only if its loss after the trial stays this close to f32's (relative)");
  tune->require_subcommand(1);

  // inspect
  std::string inspect_path;
  CLI::App* inspect = app.add_subcommand("inspect", "What a model folder or safetensors file holds, validated");
  inspect->add_option("path", inspect_path, "A model folder, a hub id in the local Hugging Face cache, or a .safetensors file")->required();

  // verify
  std::vector<std::string> verify_folders;
  CLI::App* verify = app.add_subcommand("verify", "Check that embed output folders (one per task) are complete, consistent and intact");
  verify->add_option("folders", verify_folders, "Output folders: every task's folder of one job (e.g. out/task-*), or one unsplit folder")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "stoke: %s\n", e.what());
    return 1;
  }
  // The command that was given, its shared flags, and whether it reads --input.
  struct TextCommand {
    CLI::App* cmd;
    CommonOptions* common;
    bool reads_input;
  } text_commands[] = {{tokenize, &tok.common, true},          {embed, &emb.o.common, true},
                       {classify, &cls.common, true},          {train, &trn.o.common, false},
                       {doctor_embed, &doc_emb.o.common, true}, {doctor_train, &doc_trn.o.common, false},
                       {tune_embed, &tun_emb.o.common, true},  {tune_train, &tun_trn.o.common, false}};
  for (const TextCommand& c : text_commands) {
    if (!c.cmd->parsed()) continue;
    try {
      stoke::cli::apply_config_file(c.cmd, c.common->config);
      // After --config (which may name the model): the one place --model is
      // resolved, a local folder or a hub id in the local cache.
      stoke::resolve_model_flag(*c.common);
    } catch (const CLI::Error& e) {
      std::fprintf(stderr, "stoke: --config %s: %s\n", c.common->config.c_str(), e.what());
      return 1;
    } catch (const stoke::Error& e) {
      std::fprintf(stderr, "stoke: error: %s\n", e.what());
      return 1;
    }
    // Without --input, texts come from stdin; a terminal there means the user
    // forgot --input, and waiting silently for typed texts would look hung.
    if (c.reads_input && c.cmd->count("--input") == 0 && ::isatty(STDIN_FILENO) == 1) {
      std::fprintf(stderr, "stoke: error: --input is required (or pipe texts to stdin)\n");
      return 1;
    }
  }

  try {
    if (tokenize->parsed()) {
      const stoke::TokenizeSummary s = stoke::run_tokenize(tok);
      warn_if_empty(s.records + s.skipped, tok.common.input);
      if (s.skipped > 0)
        std::fprintf(stderr, "stoke: skipped %s (no output line each): see %s\n",
                     count_of(s.skipped, "bad record", "bad records").c_str(), s.errors_file.c_str());
      if (!tok.common.quiet) {
        std::fprintf(stderr,
                     "tokenized %llu records (%llu pairs), %llu tokens in %.2f s: %s records/s, %s tokens/s; "
                     "truncated %llu at max length %lld (from %s); invalid UTF-8 replaced %llu\n",
                     static_cast<unsigned long long>(s.records), static_cast<unsigned long long>(s.pairs),
                     static_cast<unsigned long long>(s.tokens), s.seconds,
                     per_second(static_cast<double>(s.records), s.seconds).c_str(),
                     per_second(static_cast<double>(s.tokens), s.seconds).c_str(),
                     static_cast<unsigned long long>(tok.no_truncation ? 0 : s.truncated),
                     static_cast<long long>(s.max_length), s.max_length_from.c_str(),
                     static_cast<unsigned long long>(s.replaced_utf8));
      }
      if (s.capped > 0)  // said even with --quiet: these rows hold fewer ids than their texts
        std::fprintf(stderr,
                     "stoke: warning: texts over %zu MiB were tokenized from their first %zu MiB only (%llu of "
                     "them): even with --no-truncation a text's bytes are capped, so memory stays bounded\n",
                     stoke::kUntruncatedTextBytes >> 20, stoke::kUntruncatedTextBytes >> 20,
                     static_cast<unsigned long long>(s.capped));
    } else if (embed->parsed()) {
      emb.finish();
      const stoke::EmbedSummary s = stoke::run_embed(emb.o);
      for (const auto& note : s.notes) std::fprintf(stderr, "stoke: %s\n", note.c_str());
      if (!s.already_complete) warn_if_empty(s.records, emb.o.common.input);
      if (s.already_complete) {
        std::fprintf(stderr, "stoke: %s is already complete (%llu rows in %llu shards); nothing to do\n",
                     emb.o.output.c_str(), static_cast<unsigned long long>(s.texts),
                     static_cast<unsigned long long>(s.shards));
      } else if (!emb.o.common.quiet) {
        std::fprintf(stderr,
                     "embedded %llu texts (%llu tokens, %llu batches) in %.2f s on %s: %s texts/s, %s tokens/s; "
                     "%lld dims, pooling %s%s, %s; truncated %llu at max length %lld; invalid UTF-8 replaced %llu; "
                     "host syncs %llu -> %s\n",
                     static_cast<unsigned long long>(s.texts), static_cast<unsigned long long>(s.tokens),
                     static_cast<unsigned long long>(s.batches), s.seconds, s.device.c_str(),
                     per_second(static_cast<double>(s.texts), s.seconds).c_str(),
                     per_second(static_cast<double>(s.tokens), s.seconds).c_str(), static_cast<long long>(s.dims),
                     s.pooling.c_str(), s.normalize ? " + normalize" : "", s.precision.c_str(),
                     static_cast<unsigned long long>(s.truncated), static_cast<long long>(s.max_length),
                     static_cast<unsigned long long>(s.replaced_utf8), static_cast<unsigned long long>(s.host_syncs),
                     emb.o.output.c_str());
        std::fprintf(stderr,
                     "  records %llu (skipped %llu bad, %llu other tasks', %llu done by an earlier run); %llu shards; "
                     "padding efficiency %.2f; bounded by %s\n%s",
                     static_cast<unsigned long long>(s.records), static_cast<unsigned long long>(s.skipped),
                     static_cast<unsigned long long>(s.other_tasks), static_cast<unsigned long long>(s.resumed),
                     static_cast<unsigned long long>(s.shards), s.padding_efficiency, s.bound_by.c_str(),
                     s.stage_report.c_str());
        if (!s.gpu_report.empty()) std::fprintf(stderr, "  %s\n", s.gpu_report.c_str());
      }
    } else if (classify->parsed()) {
      const stoke::ClassifySummary s = stoke::run_classify(cls);
      for (const auto& note : s.notes) std::fprintf(stderr, "stoke: %s\n", note.c_str());
      warn_if_empty(s.read, cls.common.input);
      if (s.skipped > 0)
        std::fprintf(stderr, "stoke: skipped %s (no output line each): see %s\n",
                     count_of(s.skipped, "bad record", "bad records").c_str(), s.errors_file.c_str());
      if (!cls.common.quiet) {
        std::fprintf(stderr,
                     "classified %llu records (%llu pairs, %llu tokens, %llu batches) in %.2f s on %s: %s records/s; "
                     "%s; truncated %llu; host syncs %llu\n",
                     static_cast<unsigned long long>(s.records), static_cast<unsigned long long>(s.pairs),
                     static_cast<unsigned long long>(s.tokens), static_cast<unsigned long long>(s.batches), s.seconds,
                     s.device.c_str(), per_second(static_cast<double>(s.records), s.seconds).c_str(), s.mode.c_str(),
                     static_cast<unsigned long long>(s.truncated), static_cast<unsigned long long>(s.host_syncs));
        if (!s.gpu_report.empty()) std::fprintf(stderr, "  %s\n", s.gpu_report.c_str());
      }
    } else if (train->parsed()) {
      trn.finish(train);
      const stoke::TrainSummary s = stoke::run_train(trn.o);
      for (const auto& note : s.notes) std::fprintf(stderr, "stoke: %s\n", note.c_str());
      if (!trn.o.common.quiet) {
        std::fprintf(stderr,
                     "trained %lld steps (%.2f epochs, batch %lld x %lld, lr %g) on %s, %s: %llu samples in %.2f s: "
                     "%.1f samples/s, %.0f tokens/s; host syncs %llu (bound %llu)\n  last loss %.4f",
                     static_cast<long long>(s.steps), s.epochs, static_cast<long long>(s.batch_size),
                     static_cast<long long>(s.grad_accum), s.lr, s.device.c_str(), s.precision.c_str(),
                     static_cast<unsigned long long>(s.samples), s.seconds, s.samples_per_s, s.tokens_per_s,
                     static_cast<unsigned long long>(s.host_syncs), static_cast<unsigned long long>(s.host_sync_bound),
                     s.last_loss);
        if (s.has_eval)
          std::fprintf(stderr, "; eval loss %.4f, accuracy %.4f, macro-F1 %.4f", s.eval_loss, s.eval_accuracy,
                       s.eval_macro_f1);
        std::fprintf(stderr, "%s%s -> %s\n", s.resumed_from.empty() ? "" : "; resumed from ",
                     s.resumed_from.c_str(), s.output.c_str());
        if (!s.gpu_report.empty()) std::fprintf(stderr, "  %s\n", s.gpu_report.c_str());
      }
    } else if (doctor->parsed()) {
      if (doctor_embed->parsed()) {
        doc_emb.finish();
        doc.job = "embed";
        doc.embed = doc_emb.o;
      } else if (doctor_train->parsed()) {
        doc_trn.finish(doctor_train);
        doc.job = "train";
        doc.train = doc_trn.o;
      }
      const stoke::DoctorResult r = stoke::run_doctor(doc);
      std::printf("%s", r.text.c_str());
      if (!doc.html.empty()) std::printf("\nreport: %s\n", doc.html.c_str());
    } else if (tune->parsed()) {
      stoke::TuneResult r;
      if (tune_train->parsed()) {
        tun_trn.finish(tune_train);
        tun_train.train = tun_trn.o;
        r = stoke::run_tune_train(tun_train);
      } else {
        tun_emb.finish();
        tun.embed = tun_emb.o;
        r = stoke::run_tune(tun);
      }
      std::printf("%s", r.table.c_str());
    } else if (inspect->parsed()) {
      stoke::run_inspect(stoke::locate_model(inspect_path).dir.string(), std::cout);
    } else if (verify->parsed()) {
      const stoke::VerifyReport r = stoke::run_verify(verify_folders);
      for (const auto& n : r.notes) std::fprintf(stderr, "stoke: note: %s\n", n.c_str());
      for (const auto& p : r.problems) std::fprintf(stderr, "stoke: verify: %s\n", p.c_str());
      auto count = [](uint64_t n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); };
      if (!r.problems.empty()) {
        std::fprintf(stderr, "stoke: verify found %s in %s\n", count(r.problems.size(), "problem", "problems").c_str(),
                     count(r.folders, "folder", "folders").c_str());
        return 1;
      }
      std::printf("verified %s (%s): %s, %s, %llu skipped — complete, consistent, intact\n",
                  count(r.folders, "folder", "folders").c_str(), count(r.tasks, "task", "tasks").c_str(),
                  count(r.records, "record", "records").c_str(), count(r.rows, "row", "rows").c_str(),
                  static_cast<unsigned long long>(r.skipped));
    }
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "stoke: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "stoke: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stoke: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
