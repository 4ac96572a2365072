#include "jobs/train_job.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/sha256.h"
#include "core/thread_pool.h"
#include "core/trace.h"
#include "io/atomic_file.h"
#include "io/model_folder.h"
#include "io/sentence_transformers_files.h"
#include "jobs/doctor_job.h"
#include "jobs/gpu_usage.h"
#include "jobs/job_threads.h"
#include "jobs/model_session.h"
#include "jobs/model_tokenizer.h"
#include "jobs/train_output.h"
#include "jobs/version.h"
#include "model/encoder_training.h"
#include "model/trainable_encoder.h"
#include "train/checkpoint.h"
#include "train/schedule.h"
#include "train/train_data.h"
#include "train/trainer.h"

namespace stoke {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(Errc::io, p.string() + ": cannot open");
  json j = json::parse(in, nullptr, false);
  if (!j.is_object()) throw Error(Errc::format, p.string() + ": expected a JSON object");
  return j;
}

double config_number(const json& c, const char* key, double fallback) {
  auto it = c.find(key);
  return it != c.end() && it->is_number() ? it->get<double>() : fallback;
}

// The tokenizer files a Hugging Face folder may hold; copied into every
// checkpoint so it loads on its own.
std::vector<fs::path> tokenizer_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const char* name : {"vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                           "sentencepiece.bpe.model", "added_tokens.json", "spiece.model"})
    if (fs::is_regular_file(dir / name)) out.push_back(dir / name);
  return out;
}

// config.json for the trained model: the original, with the labels trained
// and the architecture the weights have.
std::string trained_config_json(json config, const HfConfig& c) {
  json id2label = json::object(), label2id = json::object();
  for (size_t i = 0; i < c.id2label.size(); ++i) {
    id2label[std::to_string(i)] = c.id2label[i];
    label2id[c.id2label[i]] = static_cast<int64_t>(i);
  }
  config["id2label"] = id2label;
  config["label2id"] = label2id;
  config.erase("num_labels");  // derived from id2label by transformers
  config["architectures"] = json::array({std::string(c.arch->sequence_classifier)});
  return config.dump(2) + "\n";
}

int64_t parse_bytes(const std::string& text) {
  if (text.empty()) return 0;
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    pos = 0;
  }
  if (pos == 0 || v <= 0) throw Error(Errc::invalid_argument, "--memory-budget \"" + text + "\": expected bytes, e.g. 8G or 512M");
  const std::string unit = text.substr(pos);
  double mul = 1;
  if (unit == "K" || unit == "KB" || unit == "KiB") mul = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MiB") mul = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GiB") mul = 1024.0 * 1024 * 1024;
  else if (!unit.empty()) throw Error(Errc::invalid_argument, "--memory-budget \"" + text + "\": unknown unit \"" + unit + "\"");
  // NaN, infinities and more than 2^62 bytes cannot be a budget (and would not convert to int64).
  if (!(v * mul >= 1) || !(v * mul <= 4.6e18))
    throw Error(Errc::invalid_argument, "--memory-budget \"" + text + "\": expected 1 byte to 4 EiB, e.g. 8G or 512M");
  return static_cast<int64_t>(v * mul);
}

// MemAvailable of /proc/meminfo (the CPU backend's device memory is host memory).
int64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return int64_t{4} << 30;
}

std::string thread_count() {
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if (omp && *omp) return omp;
  return std::to_string(ThreadPool::default_threads());
}

}  // namespace

TrainSummary run_train(const TrainOptions& o) {
  validate_common_options(o.common);
  if (o.train.empty()) throw Error(Errc::invalid_argument, "--train FILE is required");
  if (o.output.empty()) throw Error(Errc::invalid_argument, "--output DIR is required");
  if (o.on_error != "stop" && o.on_error != "skip")
    throw Error(Errc::invalid_argument, "--on-error \"" + o.on_error + "\": expected stop or skip");
  if (o.grad_accum <= 0) throw Error(Errc::invalid_argument, "--grad-accum must be positive");
  if (o.max_steps < 0)  // 0 is "unset" (--epochs decides); the CLI refuses 0 from the user
    throw Error(Errc::invalid_argument, "--max-steps " + std::to_string(o.max_steps) + ": expected at least 1");
  if (o.lr <= 0) throw Error(Errc::invalid_argument, "--lr must be positive");
  if (o.label_smoothing < 0 || o.label_smoothing >= 1)
    throw Error(Errc::invalid_argument, "--label-smoothing must be in [0, 1)");
  if (o.dropout && (*o.dropout < 0 || *o.dropout >= 1))
    throw Error(Errc::invalid_argument, "--dropout must be in [0, 1)");
  const DType dtype = parse_precision(o.common.precision);
  if (dtype == DType::f16)
    throw Error(Errc::unsupported, "--precision f16: f16 training needs the dynamic loss scaler, which comes with the "
                                   "CUDA backend; train in bf16 (same speed on the CPU, no scaler needed) or f32");
  TrainSummary sum;
  sum.output = o.output;
  sum.precision = o.common.precision;
  const fs::path out(o.output);

  // ---- output folder: locked, then fresh, overwrite, or resume
  TrainOutputStart output = prepare_train_output(o);
  const fs::path resume_dir = output.resume_dir;
  sum.notes = output.notes;

  // ---- model, tokenizer, data
  ModelTokenizer mt = open_model_tokenizer(o.common.model, o.common.max_length);
  const HfConfig& base_config = mt.folder.config;
  head_activation(*base_config.arch);  // a head no op computes is refused before the data is read
  const json config_raw = read_json_file(mt.folder.model_dir / "config.json");
  auto backend = open_backend(parse_device(o.common.device), BackendUse::training);
  sum.device = backend->name();
  std::unique_ptr<Trace> own_trace = o.common.trace.empty() || o.trace ? nullptr : std::make_unique<Trace>();
  Trace* trace = o.trace ? o.trace : own_trace.get();
  sum.native_bf16 = device_has_native_bf16(sum.device);
  JobThreads threads(*backend, own_trace.get(), trace, o.on_thread_start);
  const JobThreads::Hook& on_thread_start = threads.on_thread_start();
  if (on_thread_start) on_thread_start("trainer");
  if (trace) trace->name_thread("trainer");
  JobGpuUsage gpu(sum.device, trace);  // off (silently) unless cuda:N with NVML

  RecordReaderOptions reader = record_reader_options(CommonOptions{o.common});
  reader.path = o.train;
  reader.label_field = o.label_field;
  reader.id_field.clear();
  if (reader.format == InputFormat::text) throw Error(Errc::invalid_argument, "--train: training data needs labels: use JSONL or CSV");
  const bool skip_bad = o.on_error == "skip";
  const train::RawDataset raw_train = train::read_raw_dataset(reader, skip_bad);
  std::optional<train::RawDataset> raw_eval;
  if (!o.eval.empty()) {
    RecordReaderOptions er = reader;
    er.path = o.eval;
    er.format = input_format_for_path(o.eval);
    if (!o.common.input_format.empty()) er.format = input_format_from_name(o.common.input_format);
    raw_eval = train::read_raw_dataset(er, skip_bad);
  }
  const train::LabelSpace labels = train::resolve_labels(base_config, raw_train, o.num_labels, o.new_labels);
  // Said once, by the run that made the change; a --resume continues it.
  if (!labels.notice.empty() && resume_dir.empty()) sum.notes.push_back(labels.notice);
  HfConfig config = base_config;
  config.id2label = labels.id2label;
  config.label2id.clear();
  for (size_t i = 0; i < labels.id2label.size(); ++i) config.label2id[labels.id2label[i]] = static_cast<int64_t>(i);

  ThreadPool pool(o.common.workers > 0 ? static_cast<size_t>(o.common.workers) : 0);
  EncodeOptions encode;
  encode.max_length = static_cast<size_t>(mt.max_length);
  train::TokenizeStats tstats;
  const std::vector<train::Example> train_examples =
      train::make_examples(raw_train, labels, *mt.tokenizer, encode, &pool, &tstats);
  std::vector<train::Example> eval_examples;
  if (raw_eval) eval_examples = train::make_examples(*raw_eval, labels, *mt.tokenizer, encode, &pool, nullptr);
  sum.examples = train_examples.size();
  sum.eval_examples = eval_examples.size();
  sum.truncated = tstats.truncated;
  if (tstats.truncated > 0)
    sum.notes.push_back(std::to_string(tstats.truncated) + " of " + std::to_string(train_examples.size()) +
                        " training texts are longer than " + std::to_string(mt.max_length) +
                        " tokens and were truncated (--max-length)");

  // ---- batch size and learning rate
  int64_t batch = 0;
  const int64_t longest = mt.max_length;
  const int64_t per_token = EncoderTrainingRunner::bytes_per_token(config, dtype);
  const int64_t per_seq = EncoderTrainingRunner::bytes_per_sequence(config);
  {
    const ParamLayout layout(config);
    // parameters, gradients, two moments, the compute copies, and the eval runner's share
    const int64_t fixed = layout.numel() * 4 * 5;
    if (o.batch_size == "auto") {
      const int64_t budget = o.memory_budget.empty() ? available_memory() * 8 / 10 : parse_bytes(o.memory_budget);
      auto need = [&](int64_t b) { return fixed + b * longest * per_token + b * per_seq; };
      if (need(1) > budget)
        throw Error(Errc::invalid_argument, "--batch-size auto: not even one example of " + std::to_string(longest) +
                                                " tokens fits the memory budget of " + std::to_string(budget >> 20) + " MiB");
      // Double while the next size fits, up to --max-batch-size: one step
      // down from the first size that does not fit.
      batch = 1;
      while (batch * 2 <= o.max_batch_size && need(batch * 2) <= budget) batch *= 2;
      char line[200];
      std::snprintf(line, sizeof line,
                    "--batch-size auto: %lld (the largest power of two up to %lld whose workspace for %lld-token "
                    "examples, %.0f MiB, fits the budget of %.0f MiB)",
                    static_cast<long long>(batch), static_cast<long long>(o.max_batch_size),
                    static_cast<long long>(longest), static_cast<double>(need(batch)) / (1 << 20),
                    static_cast<double>(budget) / (1 << 20));
      sum.notes.push_back(line);
    } else {
      try {
        size_t pos = 0;
        batch = std::stoll(o.batch_size, &pos);
        if (pos != o.batch_size.size()) batch = 0;
      } catch (...) {
        batch = 0;
      }
      if (batch <= 0)
        throw Error(Errc::invalid_argument, "--batch-size \"" + o.batch_size + "\": expected a positive number or auto");
    }
  }
  double lr = o.lr;
  if (o.lr_scale_from > 0) {
    const train::LrScaling rule = train::lr_scaling_from_name(o.lr_scale);
    lr = train::scaled_lr(o.lr, batch * o.grad_accum, o.lr_scale_from, rule);
    char line[200];
    std::snprintf(line, sizeof line, "learning rate %g = %g x %s(effective batch %lld / %lld) (--lr-scale-from, %s rule)",
                  lr, o.lr, o.lr_scale == "sqrt" ? "sqrt" : "", static_cast<long long>(batch * o.grad_accum),
                  static_cast<long long>(o.lr_scale_from), o.lr_scale.c_str());
    sum.notes.push_back(line);
  }
  sum.batch_size = batch;
  sum.grad_accum = o.grad_accum;
  sum.base_lr = o.lr;
  sum.lr = lr;

  // ---- the model: from the checkpoint when resuming
  TrainableInit init;
  init.seed = o.seed;
  init.initializer_range = config_number(config_raw, "initializer_range", 0.02);
  TrainableLoadReport load_report;
  std::unique_ptr<TrainableEncoder> enc;
  if (!resume_dir.empty()) {
    const ModelFolder ck = open_model_folder(resume_dir);
    if (ck.config.id2label != config.id2label)
      throw Error(Errc::refused, "cannot resume from " + resume_dir.string() +
                                     ": its labels differ from what the training data gives now");
    enc = load_trainable_encoder(config, ck.config, open_model_folder_weights(ck), *backend, dtype, init, &load_report);
    if (!load_report.initialised.empty())
      throw Error(Errc::format, resume_dir.string() + ": model.safetensors lacks " + load_report.initialised.front());
  } else {
    enc = load_trainable_encoder(config, base_config, open_model_folder_weights(mt.folder), *backend, dtype, init,
                                 &load_report);
    if (!load_report.initialised.empty()) {
      std::string names;
      for (const auto& n : load_report.initialised) names += (names.empty() ? "" : ", ") + n;
      sum.notes.push_back("initialised afresh (seed " + std::to_string(o.seed) + "): " + names);
    }
  }

  // ---- the loop
  train::TrainerOptions t;
  t.output = out;
  t.epochs = o.epochs;
  t.max_steps = o.max_steps;
  t.batch_size = batch;
  t.grad_accum = o.grad_accum;
  t.lr = lr;
  t.schedule = train::schedule_from_name(o.schedule);
  t.warmup_steps = o.warmup_steps;
  t.warmup_ratio = o.warmup_ratio;
  t.seed = o.seed;
  t.shuffle = !o.no_shuffle;
  t.group_by_length = !o.no_group_by_length;
  t.log_every = o.log_every;
  const std::string strategy = !o.eval_strategy.empty() ? o.eval_strategy : (o.eval.empty() ? "no" : "steps");
  t.eval_strategy = train::eval_strategy_from_name(strategy);
  t.eval_every = o.eval_every > 0 ? o.eval_every : o.log_every;
  t.save_every = o.save_every;
  t.save_total_limit = o.save_total_limit;
  t.load_best = o.load_best;
  t.metric = o.metric;
  // The config's own rates, under its architecture's field names.
  const double hidden = config.hidden_dropout, attention = config.attention_dropout;
  const double classifier = config.classifier_dropout;
  t.dropout.hidden = static_cast<float>(o.dropout ? *o.dropout : hidden);
  t.dropout.attention = static_cast<float>(o.dropout ? *o.dropout : attention);
  t.dropout.classifier = static_cast<float>(o.dropout ? *o.dropout : classifier);
  t.label_smoothing = static_cast<float>(o.label_smoothing);
  t.optim.weight_decay = o.weight_decay;
  t.optim.decay_all = o.decay_all;
  t.optim.max_grad_norm = o.max_grad_norm;
  t.quiet = o.common.quiet;
  t.debug_sync_each_step = o.debug_sync_each_step;
  t.trace = trace;
  t.identity = {{"model", fs::absolute(o.common.model).lexically_normal().string()},
                {"train_sha256", raw_train.sha256},
                {"eval_sha256", raw_eval ? raw_eval->sha256 : ""},
                {"labels", config.id2label},
                {"max_length", mt.max_length},
                {"precision", o.common.precision},
                {"batch_size", batch},
                {"grad_accum", o.grad_accum},
                {"lr", lr},
                {"schedule", o.schedule},
                {"warmup_steps", o.warmup_steps},
                {"warmup_ratio", o.warmup_ratio},
                {"epochs", o.epochs},
                {"max_steps", o.max_steps},
                {"seed", o.seed},
                {"shuffle", t.shuffle},
                {"group_by_length", t.shuffle && t.group_by_length},
                {"dropout", {o.dropout ? *o.dropout : hidden, o.dropout ? *o.dropout : attention,
                             o.dropout ? *o.dropout : classifier}},
                {"label_smoothing", o.label_smoothing},
                {"weight_decay", o.weight_decay},
                {"decay_all", o.decay_all},
                {"max_grad_norm", o.max_grad_norm}};
  train::SaveContext save;
  save.config_json = trained_config_json(config_raw, config);
  save.tokenizer_files = tokenizer_files(mt.folder.model_dir);
  // The base's sentence-transformers files, so `stoke embed` on the trained
  // folder pools and normalizes as the base did (not unnormalized mean pooling).
  save.extra_files = sentence_transformers_files(mt.folder.model_dir);
  train::Trainer trainer(*enc, *backend, t, train_examples, raw_eval ? &eval_examples : nullptr, labels.regression,
                         save);
  if (!resume_dir.empty()) {
    trainer.resume_from(resume_dir);
    sum.resumed_from = resume_dir.string();
  }
  const train::TrainReport r = trainer.run();

  // ---- the final model, in the output folder itself
  const uint64_t syncs_before_save = backend->host_syncs();
  {
    const int64_t n = enc->layout.numel();
    std::vector<float> params(static_cast<size_t>(n));
    backend->copy_to_host(params.data(), enc->master_data(), static_cast<size_t>(n) * 4);
    backend->wait(*backend->record_event());
    train::CheckpointContents c;
    c.layout = &enc->layout;
    c.params = params.data();
    c.config_json = save.config_json;
    c.tokenizer_files = save.tokenizer_files;
    c.extra_files = save.extra_files;
    if (o.load_best && r.best_metric && r.best_step != r.steps) {
      // The best evaluation's weights, from its checkpoint.
      const fs::path best = train::checkpoint_path(out, r.best_step);
      train::verify_checkpoint(best);
      auto file = SafetensorsFile::open(best / "model.safetensors");
      for (const ParamSlot& s : enc->layout.slots()) {
        const StoredTensor* st = file->find(s.name);
        if (!st) throw Error(Errc::format, (best / "model.safetensors").string() + ": missing " + s.name);
        copy_stored_as_f32(*st, params.data() + s.offset);
      }
      sum.notes.push_back("--load-best: the model in " + o.output + " is step " + std::to_string(r.best_step) +
                          "'s (" + o.metric + " " + std::to_string(*r.best_metric) + ")");
    }
    train::write_model_files(out, c);
  }
  const uint64_t total_syncs = r.host_syncs + (backend->host_syncs() - syncs_before_save);

  sum.steps = r.steps;
  sum.total_steps = r.total_steps;
  sum.epochs = r.epochs_done;
  sum.samples = r.samples;
  sum.tokens = r.tokens;
  sum.seconds = r.train_seconds;
  sum.samples_per_s = r.train_seconds > 0 ? static_cast<double>(r.samples) / r.train_seconds : 0;
  sum.tokens_per_s = r.train_seconds > 0 ? static_cast<double>(r.tokens) / r.train_seconds : 0;
  sum.host_syncs = total_syncs;
  sum.device_busy_seconds = r.device_busy;
  sum.expected_syncs = r.log_reads + r.evals + r.saves + 1;
  sum.log_every = o.log_every;
  const int64_t run_steps = r.steps - r.resumed_from_step;
  // The bound, 1 + steps/log_every + evals + saves (the final model
  // is a save), plus a read at each epoch end that is neither a log step nor the last.
  sum.host_sync_bound = 1 + static_cast<uint64_t>(run_steps / std::max<int64_t>(o.log_every, 1)) + r.evals +
                        r.saves + 1 + r.extra_epoch_reads;
  sum.last_loss = r.last_loss;
  sum.last_accuracy = r.last_accuracy;
  if (r.last_eval) {
    sum.has_eval = true;
    sum.eval_loss = r.last_eval->loss;
    sum.eval_accuracy = r.last_eval->accuracy;
    sum.eval_macro_f1 = r.last_eval->macro_f1;
  }

  // ---- run.json: every setting that affects speed or result, and the throughput
  json run;
  run["stoke_version"] = stoke_version();
  run["settings"] = t.identity;
  run["settings"]["base_lr"] = o.lr;
  run["settings"]["lr_scale_from"] = o.lr_scale_from;
  run["settings"]["lr_scale"] = o.lr_scale;
  run["settings"]["effective_batch"] = batch * o.grad_accum;
  run["settings"]["batch_size_from"] = o.batch_size == "auto" ? "auto" : "flag";
  run["settings"]["warmup_steps_used"] = train::warmup_steps_for(r.total_steps, o.warmup_steps, o.warmup_ratio);
  run["settings"]["workers"] = o.common.workers;
  run["settings"]["threads"] = thread_count();
  run["settings"]["device"] = sum.device;
  run["settings"]["log_every"] = o.log_every;
  run["settings"]["eval_strategy"] = strategy;
  run["settings"]["save_every"] = o.save_every;
  run["data"] = {{"train", o.train}, {"train_examples", train_examples.size()}, {"eval", o.eval},
                 {"eval_examples", eval_examples.size()}, {"truncated", tstats.truncated},
                 {"skipped", raw_train.bad.size() + (raw_eval ? raw_eval->bad.size() : 0)}};
  run["steps"] = r.steps;
  run["total_steps"] = r.total_steps;
  run["steps_per_epoch"] = r.steps_per_epoch;
  run["epochs"] = r.epochs_done;
  run["resumed_from_step"] = r.resumed_from_step;
  run["throughput"] = {{"samples_per_s", sum.samples_per_s},
                       {"tokens_per_s", sum.tokens_per_s},
                       {"train_seconds", r.train_seconds},
                       {"samples", r.samples},
                       {"tokens", r.tokens},
                       {"device_busy_seconds", r.device_busy}};
  run["host_syncs"] = total_syncs;
  run["host_sync_reads"] = {{"log", r.log_reads}, {"eval", r.evals}, {"save", r.saves}, {"final_model", 1}};
  run["throttle_waits"] = r.throttle_waits;
  run["final"] = {{"loss", r.last_loss}, {"accuracy", r.last_accuracy}};
  if (r.last_eval) {
    run["final"]["eval_loss"] = r.last_eval->loss;
    run["final"]["eval_accuracy"] = r.last_eval->accuracy;
    run["final"]["eval_macro_f1"] = r.last_eval->macro_f1;
  }
  if (const auto g = gpu.finish()) {
    sum.gpu_report = gpu_summary_line(*g);
    run["gpu"] = gpu_summary_json(*g);
  }
  write_file_atomic(out / "run.json", run.dump(2) + "\n");
  threads.stop();  // every device span is in the trace from here on
  if (trace && !o.common.trace.empty()) {
    trace->set_metadata(json{{"job", "train"}, {"facts", doctor::to_json(train_facts(sum))}}.dump());
    write_file_atomic(o.common.trace, std::string_view(trace->to_json()));
  }
  return sum;
}

}  // namespace stoke
