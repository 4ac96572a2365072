// The stoke command line: parses flags, calls one job function, and turns any
// error into one clear line on stderr and exit status 1. No job logic here.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

#include "apps/stoke/config_json.h"
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

// The flags every job that reads texts shares (DESIGN conventions).
void add_common_flags(CLI::App* cmd, CommonOptions& o) {
  cmd->add_option("--model", o.model, "Hugging Face model folder (config.json, tokenizer files, weights); required");
  cmd->add_option("--input", o.input,
                  "Input file: JSONL (one object per line), CSV or TSV (a header row naming the columns) or plain "
                  "text (one text per line); - reads stdin");
  cmd->add_option("--input-format", o.input_format,
                  "jsonl, csv, tsv or text (default: from the file name: .csv, .tsv, .txt, else JSONL)");
  cmd->add_option("--text-field", o.text_field, "Field holding the text");
  cmd->add_option("--pair-field", o.pair_field, "Field holding the second text of a pair (optional per record)");
  cmd->add_option("--id-field", o.id_field,
                  "Field holding the record id (default: the 0-based record number; tokenize adds \"id\" when given)");
  cmd->add_option("--max-length", o.max_length,
                  "Max tokens per sequence, specials included (default: sentence_bert_config max_seq_length, "
                  "else tokenizer model_max_length, else the model's usable positions)");
  cmd->add_option("--device", o.device, "auto, cpu, cuda or cuda:N");
  cmd->add_option("--precision", o.precision, "f32, bf16 or f16");
  cmd->add_option("--workers", o.workers, "Tokenizer threads (0: one per core)");
  cmd->add_option("--batch-tokens", o.batch_tokens, "Tokens per batch (token budget)");
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

void add_embed_flags(CLI::App* embed, EmbedCli& cli) {
  stoke::EmbedOptions& emb = cli.o;
  add_common_flags(embed, emb.common);
  embed->add_option("--output", emb.output, "Output folder (manifest.json, embeddings-NNNNN.npy, ids-NNNNN.jsonl); required");
  embed->add_option("--pooling", emb.pooling,
                    "cls, mean, max, mean_sqrt_len or lasttoken (default: the model's sentence-transformers pooling, else mean)");
  auto* norm_flag = embed->add_flag("--normalize", cli.normalize, "L2-normalize the vectors (default: as the model's modules.json says)");
  embed->add_flag("--no-normalize", cli.no_normalize, "Do not normalize")->excludes(norm_flag);
  embed->add_option("--dimensions", emb.dimensions, "Keep the first D dimensions after normalizing (Matryoshka; 0: all)");
  embed->add_option("--prompt", emb.prompt, "Text put before every input (e.g. \"query: \")");
  embed->add_option("--prompt-name", emb.prompt_name, "A prompt by name from config_sentence_transformers.json");
  embed->add_option("--output-dtype", emb.output_dtype, "f32 or f16 (.npy element type)");
  embed->add_option("--max-batch-size", emb.max_batch_size, "Sequences per batch at most");
  embed->add_flag("--overwrite", emb.overwrite, "Replace output already in the folder");
  embed->add_flag("--resume", emb.resume,
                  "Continue the job whose manifest is in the output folder (a fresh start when there is none)");
  embed->add_option("--on-error", emb.on_error,
                    "A bad record (invalid JSON/CSV, missing or non-string text): stop, or skip it into errors.jsonl");
  embed->add_option("--sort-window", emb.sort_window, "Records sorted by length together (memory vs padding-free batches)");
  embed->add_option("--shard-size", emb.shard_size, "Rows per embeddings-NNNNN.npy shard (the unit of a commit)");
  embed->add_option("--shard-index", emb.shard_index, "This task's index i: it embeds records r with r mod N == i");
  embed->add_option("--num-shards", emb.num_shards, "Number of tasks N the input is split into (job arrays)");
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
    if (cmd->count("--resume") > 0) {
      o.resume = true;
      o.resume_from = resume;
    }
    if (cmd->count("--dropout") > 0) o.dropout = dropout;
  }
};

void add_train_flags(CLI::App* train, TrainCli& cli) {
  stoke::TrainOptions& trn = cli.o;
  add_common_flags(train, trn.common);
  train->add_option("--train", trn.train, "Training data: JSONL or CSV with text, optional text_pair, and label; required");
  train->add_option("--eval", trn.eval, "Evaluation data, same form (loss, accuracy, macro-F1 without gradients)");
  train->add_option("--output", trn.output, "Output folder: checkpoint-STEP/, the final model, log.jsonl, run.json; required");
  train->add_option("--label-field", trn.label_field, "Field holding the label (integer id, name, or number for regression)");
  train->add_option("--epochs", trn.epochs, "Passes over the training data");
  train->add_option("--max-steps", trn.max_steps, "Optimizer steps in all (overrides --epochs when > 0)");
  train->add_option("--batch-size", trn.batch_size, "Examples per micro-batch, or auto (largest that fits --memory-budget)");
  train->add_option("--max-batch-size", trn.max_batch_size, "Largest batch --batch-size auto tries");
  train->add_option("--memory-budget", trn.memory_budget, "Memory --batch-size auto may plan for, e.g. 8G (default: 80% of available)");
  train->add_option("--grad-accum", trn.grad_accum, "Micro-batches per optimizer step");
  train->add_option("--lr", trn.lr, "Peak learning rate (before --lr-scale-from)");
  train->add_option("--lr-scale-from", trn.lr_scale_from, "Scale --lr by effective batch / B0 (linear scaling rule; 0: off)");
  train->add_option("--lr-scale", trn.lr_scale, "linear or sqrt (with --lr-scale-from)");
  train->add_option("--seed", trn.seed, "Seed for shuffling, dropout masks and new heads");
  train->add_flag("--no-shuffle", trn.no_shuffle, "File order exactly, no regrouping");
  train->add_flag("--no-group-by-length", trn.no_group_by_length, "Shuffle without grouping similar lengths");
  train->add_option("--log-every", trn.log_every, "Read the loss from the device every K steps (one host sync each)");
  train->add_option("--eval-strategy", trn.eval_strategy, "steps, epoch or no (default: steps with --eval)");
  train->add_option("--eval-every", trn.eval_every, "Evaluate every K steps (default: --log-every)");
  train->add_option("--save-every", trn.save_every, "Checkpoint every K steps (0: only the final model)");
  train->add_option("--save-total-limit", trn.save_total_limit, "Keep the newest N checkpoints (0: all)");
  train->add_flag("--load-best", trn.load_best, "End with the weights of the best evaluation (--metric)");
  train->add_option("--metric", trn.metric, "eval_loss, eval_accuracy or eval_macro_f1 (for --load-best)");
  train->add_option("--resume", cli.resume, "Continue from CHECKPOINT, or from the newest valid one in --output")
      ->expected(0, 1);
  train->add_flag("--overwrite", trn.overwrite, "Replace a training run already in --output");
  train->add_option("--schedule", trn.schedule, "linear, constant or cosine");
  train->add_option("--warmup-steps", trn.warmup_steps, "Warmup steps (0: --warmup-ratio)");
  train->add_option("--warmup-ratio", trn.warmup_ratio, "Warmup as a fraction of all steps");
  train->add_option("--weight-decay", trn.weight_decay, "AdamW decoupled weight decay");
  train->add_flag("--decay-all", trn.decay_all, "Decay biases and LayerNorm weights too");
  train->add_option("--max-grad-norm", trn.max_grad_norm, "Clip the global gradient norm (0: no clipping)");
  train->add_option("--dropout", cli.dropout, "Every dropout probability (default: the config's; 0 disables)");
  train->add_option("--label-smoothing", trn.label_smoothing, "Cross-entropy label smoothing");
  train->add_option("--num-labels", trn.num_labels, "Outputs of the classification head (a new head when it changes)");
  train->add_flag("--new-labels", trn.new_labels, "Let labels outside a fine-tuned model's label names replace them (a new head)");
  train->add_option("--on-error", trn.on_error, "A bad record: stop, or skip it");
  train->add_flag("--debug-sync-each-step", trn.debug_sync_each_step,
                  "Debugging: read from the device after every step (the mistake `stoke doctor` diagnoses)");
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
  add_common_flags(tokenize, tok.common);
  tokenize->add_option("--output", tok.output, "Output JSONL ({\"ids\", \"tokens\"[, \"type_ids\"]} per record); - is stdout");
  tokenize->add_flag("--no-truncation", tok.no_truncation, "Keep every token even past the max length");

  // embed
  EmbedCli emb;
  CLI::App* embed = app.add_subcommand("embed", "Sentence embeddings for every input record, as .npy files + a manifest");
  add_embed_flags(embed, emb);

  // classify
  stoke::ClassifyOptions cls;
  CLI::App* classify = app.add_subcommand("classify", "Classifier logits, label and score for every input record (pairs: cross-encoder)");
  add_common_flags(classify, cls.common);
  classify->add_option("--output", cls.output, "Output JSONL, one line per input record; - is stdout");
  classify->add_option("--max-batch-size", cls.max_batch_size, "Sequences per batch at most");

  // train
  TrainCli trn;
  CLI::App* train = app.add_subcommand("train", "Fine-tune a sequence classifier; checkpoints load in transformers");
  add_train_flags(train, trn);

  // doctor
  stoke::DoctorOptions doc;
  EmbedCli doc_emb;
  TrainCli doc_trn;
  CLI::App* doctor = app.add_subcommand("doctor", "Say why the device is idle: profile a short run (or read a trace) and "
                                                  "name what bounds it, with evidence and advice");
  doctor->add_option("--trace", doc.trace_in, "Diagnose a trace a run wrote (stoke embed/train --trace FILE)");
  doctor->add_option("--html", doc.html, "Also write a self-contained HTML report (timeline, per-stage bars)");
  CLI::App* doctor_embed = doctor->add_subcommand("embed", "Profile `stoke embed` with these flags");
  add_embed_flags(doctor_embed, doc_emb);
  doctor_embed->add_option("--seconds", doc.seconds, "Read records for this long (into a temporary output; "
                                                     "with --output the whole run is profiled)");
  doctor_embed->add_option("--html", doc.html, "Also write a self-contained HTML report");
  CLI::App* doctor_train = doctor->add_subcommand("train", "Profile `stoke train` with these flags");
  add_train_flags(doctor_train, doc_trn);
  doctor_train->add_option("--steps", doc.steps, "Optimizer steps to profile when --max-steps is not given");
  doctor_train->add_option("--html", doc.html, "Also write a self-contained HTML report");
  doctor->require_subcommand(0, 1);

  // tune
  stoke::TuneOptions tun;
  EmbedCli tun_emb;
  CLI::App* tune = app.add_subcommand("tune", "Find faster settings: short trials, one knob at a time, written as a --config file");
  CLI::App* tune_embed = tune->add_subcommand("embed", "Tune `stoke embed` starting from these flags");
  add_embed_flags(tune_embed, tun_emb);
  tune_embed->add_option("--seconds-per-trial", tun.seconds_per_trial, "How long each trial reads records");
  tune_embed->add_option("--write-config", tun.write_config, "Write the winning settings to FILE (a --config file); without it they are only printed");
  tune_embed->add_option("--min-cosine", tun.min_cosine,
                         "A lower precision is taken only if every embedding keeps this cosine to f32's");
  tune_embed->add_option("--max-workers", tun.max_workers, "Most tokenizer workers to try (0: the cores)");
  stoke::TuneTrainOptions tun_train;
  TrainCli tun_trn;
  CLI::App* tune_train = tune->add_subcommand("train", "Tune `stoke train` starting from these flags");
  add_train_flags(tune_train, tun_trn);
  tune_train->add_option("--steps-per-trial", tun_train.steps_per_trial, "Optimizer steps each trial runs");
  tune_train->add_option("--write-config", tun_train.write_config, "Write the winning settings to FILE (a --config file); without it they are only printed");
  tune_train->add_option("--max-loss-change", tun_train.max_loss_change,
                         "bf16 is taken only if its loss after the trial stays this close to f32's (relative)");
  tune->require_subcommand(1);

  // inspect
  std::string inspect_path;
  CLI::App* inspect = app.add_subcommand("inspect", "What a model folder or safetensors file holds, validated");
  inspect->add_option("path", inspect_path, "A model folder or a .safetensors file")->required();

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
  try {
    if (tokenize->parsed()) stoke::cli::apply_config_file(tokenize, tok.common.config);
    if (embed->parsed()) stoke::cli::apply_config_file(embed, emb.o.common.config);
    if (classify->parsed()) stoke::cli::apply_config_file(classify, cls.common.config);
    if (train->parsed()) stoke::cli::apply_config_file(train, trn.o.common.config);
    if (doctor_embed->parsed()) stoke::cli::apply_config_file(doctor_embed, doc_emb.o.common.config);
    if (doctor_train->parsed()) stoke::cli::apply_config_file(doctor_train, doc_trn.o.common.config);
    if (tune_embed->parsed()) stoke::cli::apply_config_file(tune_embed, tun_emb.o.common.config);
    if (tune_train->parsed()) stoke::cli::apply_config_file(tune_train, tun_trn.o.common.config);
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "stoke: --config %s: %s\n", tok.common.config.c_str(), e.what());
    return 1;
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "stoke: error: %s\n", e.what());
    return 1;
  }

  try {
    if (tokenize->parsed()) {
      const stoke::TokenizeSummary s = stoke::run_tokenize(tok);
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
      stoke::run_inspect(inspect_path, std::cout);
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
