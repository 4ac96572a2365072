#include "jobs/train_job.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "core/crash_point.h"
#include "core/error.h"
#include "core/sha256.h"
#include "core/thread_pool.h"
#include "core/trace.h"
#include "dist/communicator.h"
#include "dist/data_parallel_path.h"
#include "dist/fingerprint.h"
#include "io/atomic_file.h"
#include "io/model_folder.h"
#include "io/sentence_transformers_files.h"
#include "jobs/doctor_job.h"
#include "jobs/gemm_fallback_report.h"
#include "jobs/gpu_usage.h"
#include "jobs/job_threads.h"
#include "jobs/model_session.h"
#include "jobs/model_source_record.h"
#include "jobs/model_tokenizer.h"
#include "jobs/train_embedding.h"
#include "jobs/train_output.h"
#include "jobs/version.h"
#include "model/encoder_training.h"
#include "model/trainable_encoder.h"
#include "train/checkpoint.h"
#include "train/micro_batch_split.h"
#include "train/schedule.h"
#include "train/train_data.h"
#include "train/trainer.h"
#include "text/tokenizer_loader.h"
#ifdef STOKE_HAVE_NCCL
#include "cuda/cuda_backend.h"
#include "cuda/nccl/nccl_allreduce.h"
#endif

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
  for (const char* name : kTokenizerFileNames)
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

std::string thread_count() {
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if (omp && *omp) return omp;
  return std::to_string(ThreadPool::default_threads());
}

// ---- the flags: every check that needs no file
DType check_train_options(const TrainOptions& o) {
  validate_common_options(o.common);
  if (o.train.empty()) throw Error(Errc::invalid_argument, "--train FILE is required");
  if (o.output.empty()) throw Error(Errc::invalid_argument, "--output DIR is required");
  if (o.grad_accum <= 0) throw Error(Errc::invalid_argument, "--grad-accum must be positive");
  if (o.max_steps < 0)  // 0 is "unset" (--epochs decides); the CLI refuses 0 from the user
    throw Error(Errc::invalid_argument, "--max-steps " + std::to_string(o.max_steps) + ": expected at least 1");
  if (o.lr <= 0) throw Error(Errc::invalid_argument, "--lr must be positive");
  if (o.label_smoothing < 0 || o.label_smoothing >= 1)
    throw Error(Errc::invalid_argument, "--label-smoothing must be in [0, 1)");
  if (o.dropout && (*o.dropout < 0 || *o.dropout >= 1))
    throw Error(Errc::invalid_argument, "--dropout must be in [0, 1)");
  if (o.common.precision == Precision::int8)
    throw Error(Errc::unsupported, "--precision int8: quantized linears are for embed and classify (inference); "
                                   "train in f32 or bf16");
  const DType dtype = precision_dtype(o.common.precision);
  const LossScalerConfig scaler_defaults;
  if (dtype != DType::f16 && (o.loss_scale_init != scaler_defaults.init_scale ||
                              o.loss_scale_growth_interval != scaler_defaults.growth_interval))
    throw Error(Errc::invalid_argument, "--loss-scale-init / --loss-scale-growth-interval: the dynamic loss scale is "
                                        "for --precision f16 only (bf16 and f32 need none)");
  if (!(o.loss_scale_init > 0) || !std::isfinite(o.loss_scale_init) || o.loss_scale_init > 3.4028234663852886e38)
    throw Error(Errc::invalid_argument, "--loss-scale-init must be positive and at most the largest f32");
  if (o.loss_scale_growth_interval < 1)
    throw Error(Errc::invalid_argument, "--loss-scale-growth-interval must be at least 1");
  return dtype;
}

// ---- data: the files read, the labels they make, their tokenized examples
struct TrainingData {
  train::RawDataset raw_train;
  std::optional<train::RawDataset> raw_eval;
  train::LabelSpace labels;
  HfConfig config;  // the base model's, with the labels trained
  std::vector<train::Example> train_examples, eval_examples;
  train::TokenizeStats stats;
};

// --train and --eval, read whole (bad records stop the job or are collected).
void read_datasets(const TrainOptions& o, TrainingData& d) {
  RecordReaderOptions reader = record_reader_options(CommonOptions{o.common});
  reader.path = o.train;
  reader.label_field = o.label_field;
  reader.id_field.clear();
  if (reader.format == InputFormat::text) throw Error(Errc::invalid_argument, "--train: training data needs labels: use JSONL or CSV");
  const bool skip_bad = o.skip_bad_records;
  d.raw_train = train::read_raw_dataset(reader, skip_bad);
  if (!o.eval.empty()) {
    RecordReaderOptions er = reader;
    er.path = o.eval;
    er.format = input_format_for_path(o.eval);
    if (!o.common.input_format.empty()) er.format = input_format_from_name(o.common.input_format);
    d.raw_eval = train::read_raw_dataset(er, skip_bad);
  }
}

TrainingData read_training_data(const TrainOptions& o, const ModelTokenizer& mt, bool resuming, TrainSummary& sum) {
  TrainingData d;
  read_datasets(o, d);
  d.labels = train::resolve_labels(mt.folder.config, d.raw_train, o.num_labels, o.new_labels);
  // Said once, by the run that made the change; a --resume continues it.
  if (!d.labels.notice.empty() && !resuming) sum.notes.push_back(d.labels.notice);
  d.config = mt.folder.config;
  d.config.id2label = d.labels.id2label;
  d.config.label2id.clear();
  for (size_t i = 0; i < d.labels.id2label.size(); ++i) d.config.label2id[d.labels.id2label[i]] = static_cast<int64_t>(i);

  ThreadPool pool(o.common.workers > 0 ? static_cast<size_t>(o.common.workers) : 0);
  EncodeOptions encode;
  encode.max_length = static_cast<size_t>(mt.max_length);
  d.train_examples = train::make_examples(d.raw_train, d.labels, *mt.tokenizer, encode, &pool, &d.stats);
  if (d.raw_eval) d.eval_examples = train::make_examples(*d.raw_eval, d.labels, *mt.tokenizer, encode, &pool, nullptr);
  sum.examples = d.train_examples.size();
  sum.eval_examples = d.eval_examples.size();
  sum.truncated = d.stats.truncated;
  if (d.stats.truncated > 0)
    sum.notes.push_back(std::to_string(d.stats.truncated) + " of " + std::to_string(d.train_examples.size()) +
                        " training texts are longer than " + std::to_string(mt.max_length) +
                        " tokens and were truncated (--max-length)");
  return d;
}

// ---- batch size and learning rate
// --batch-size auto, planned: the largest power of two up to
// --max-batch-size whose workspace for `longest`-token examples fits the
// budget, 80% of the memory the device says is free (or --memory-budget).
// `why` gets the reason, for the note.
int64_t planned_auto_batch(const TrainOptions& o, const HfConfig& config, DType dtype, int64_t longest,
                           const Backend& backend, std::string& why) {
  const int64_t per_token = EncoderTrainingRunner::bytes_per_token(config, dtype);
  const int64_t per_seq = EncoderTrainingRunner::bytes_per_sequence(config);
  const ParamLayout layout(config);
  // parameters, gradients, two moments, the compute copies, and the eval runner's share
  const int64_t fixed = layout.numel() * 4 * 5;
  std::string measured;
  int64_t budget = 0;
  if (!o.memory_budget) {
    const Backend::FreeMemory free = backend.free_memory();
    budget = static_cast<int64_t>(std::min<size_t>(free.bytes, size_t{1} << 62)) * 8 / 10;
    measured = "80% of " + std::to_string(free.bytes >> 20) + " MiB free (" + free.source + ")";
  } else {
    budget = *o.memory_budget;
    measured = "--memory-budget";
  }
  auto need = [&](int64_t b) { return fixed + b * longest * per_token + b * per_seq; };
  if (need(1) > budget)
    throw Error(Errc::invalid_argument, "--batch-size auto: not even one example of " + std::to_string(longest) +
                                            " tokens fits the memory budget of " + std::to_string(budget >> 20) +
                                            " MiB (" + measured + ")");
  // Double while the next size fits, up to --max-batch-size: one step
  // down from the first size that does not fit.
  int64_t batch = 1;
  while (batch * 2 <= o.max_batch_size && need(batch * 2) <= budget) batch *= 2;
  char line[160];
  std::snprintf(line, sizeof line, "whose workspace for %lld-token examples, %.0f MiB, fits the budget of %.0f MiB",
                static_cast<long long>(longest), static_cast<double>(need(batch)) / (1 << 20),
                static_cast<double>(budget) / (1 << 20));
  why = "the largest power of two up to " + std::to_string(o.max_batch_size) + " " + line + ": " + measured;
  return batch;
}

// --batch-size auto, tried for real: the planned size's training workspace
// (the longest examples side by side, as the trainer allocates it) is
// allocated once; a device that refuses it steps down by halves.
int64_t fitted_auto_batch(int64_t batch, const TrainableEncoder& enc, Backend& backend,
                          const std::vector<train::Example>& examples, const std::string& why,
                          std::vector<std::string>& notes) {
  std::vector<int64_t> lengths;
  for (const train::Example& e : examples) lengths.push_back(static_cast<int64_t>(e.ids.size()));
  const int64_t planned = batch;
  std::string refusal;
  for (;;) {
    try {
      crash_point("auto_batch_workspace");
      EncoderTrainingRunner trial(enc, backend, std::max<int64_t>(train::workspace_tokens(lengths, batch), 1), batch);
      break;
    } catch (const OutOfMemoryError& e) {
      if (refusal.empty()) refusal = e.what();
      if (batch == 1)
        throw Error(Errc::device, "--batch-size auto: not even one training example fits the device (" + refusal + ")");
      batch /= 2;
    }
  }
  std::string line = "--batch-size auto: " + std::to_string(batch) + " (";
  if (batch == planned)
    line += why + ")";
  else
    line += "planned " + std::to_string(planned) + ", " + why + "; the device refused its workspace: " + refusal + ")";
  notes.push_back(line);
  return batch;
}

int64_t batch_size_from_flag(const TrainOptions& o) {
  if (o.batch_size <= 0)
    throw Error(Errc::invalid_argument, "--batch-size " + std::to_string(o.batch_size) + ": expected a positive number or auto");
  return o.batch_size;
}

// --lr, scaled by the linear (or sqrt) rule when --lr-scale-from is given;
// `batch` is the global micro-batch (per-rank batch x ranks).
double learning_rate_for(const TrainOptions& o, int64_t batch, std::vector<std::string>& notes) {
  if (o.lr_scale_from <= 0) return o.lr;
  const train::LrScaling rule = o.lr_scale;
  const double lr = train::scaled_lr(o.lr, batch * o.grad_accum, o.lr_scale_from, rule);
  char line[200];
  std::snprintf(line, sizeof line, "learning rate %g = %g x %s(effective batch %lld / %lld) (--lr-scale-from, %s rule)",
                lr, o.lr, rule == train::LrScaling::sqrt ? "sqrt" : "", static_cast<long long>(batch * o.grad_accum),
                static_cast<long long>(o.lr_scale_from), train::lr_scaling_name(rule));
  notes.push_back(line);
  return lr;
}

// ---- the model: from the checkpoint when resuming, else the base (new heads seeded)
std::unique_ptr<TrainableEncoder> load_model(const TrainOptions& o, const fs::path& resume_dir, const HfConfig& config,
                                             const ModelFolder& base, const json& config_raw, Backend& backend,
                                             DType dtype, std::vector<std::string>& notes) {
  TrainableInit init;
  init.heads = o.objective == train::Objective::classify ? ParamHeads::classifier : ParamHeads::none;
  init.seed = o.seed;
  init.initializer_range = config_number(config_raw, "initializer_range", 0.02);
  // An embedding model's Dense modules train with the encoder: from the
  // checkpoint's module folders when resuming, else the base's.
  if (init.heads == ParamHeads::none) {
    init.dense = base.st.dense;
    init.dense_folder = resume_dir.empty() ? base.dir : resume_dir;
  }
  TrainableLoadReport load_report;
  if (!resume_dir.empty()) {
    const ModelFolder ck = open_model_folder(resume_dir);
    if (init.heads == ParamHeads::classifier && ck.config.id2label != config.id2label)
      throw Error(Errc::refused, "cannot resume from " + resume_dir.string() +
                                     ": its labels differ from what the training data gives now");
    auto enc = load_trainable_encoder(config, ck.config, open_model_folder_weights(ck), backend, dtype, init, &load_report);
    if (!load_report.initialised.empty())
      throw Error(Errc::format, resume_dir.string() + ": model.safetensors lacks " + load_report.initialised.front());
    return enc;
  }
  auto enc = load_trainable_encoder(config, base.config, open_model_folder_weights(base), backend, dtype, init,
                                    &load_report);
  if (!load_report.initialised.empty()) {
    std::string names;
    for (const auto& n : load_report.initialised) names += (names.empty() ? "" : ", ") + n;
    notes.push_back("initialised afresh (seed " + std::to_string(o.seed) + "): " + names);
  }
  return enc;
}

// ---- the loop's settings
// Every dropout probability: --dropout, else the config's, read under its
// architecture's field names (classifier_dropout null -> hidden).
struct DropoutProbabilities {
  double hidden, attention, classifier;
};
DropoutProbabilities dropout_rates(const TrainOptions& o, const HfConfig& config) {
  if (o.dropout) return {*o.dropout, *o.dropout, *o.dropout};
  return {config.hidden_dropout, config.attention_dropout, config.classifier_dropout};
}

// --eval-strategy, or its default: steps with --eval, else no.
train::EvalStrategy eval_strategy_of(const TrainOptions& o) {
  if (o.eval_strategy) return *o.eval_strategy;
  return o.eval.empty() ? train::EvalStrategy::no : train::EvalStrategy::steps;
}

train::TrainerOptions trainer_options(const TrainOptions& o, int64_t batch, double lr, const DropoutProbabilities& dropout,
                                      Trace* trace, dist::Communicator& comm) {
  train::TrainerOptions t;
  t.comm = &comm;
  t.bucket_bytes = o.bucket_mb << 20;
  t.output = o.output;
  t.epochs = o.epochs;
  t.max_steps = o.max_steps;
  t.batch_size = batch;
  t.grad_accum = o.grad_accum;
  t.lr = lr;
  t.schedule = o.schedule;
  t.warmup_steps = o.warmup_steps;
  t.warmup_ratio = o.warmup_ratio;
  t.seed = o.seed;
  t.shuffle = !o.no_shuffle;
  t.group_by_length = !o.no_group_by_length;
  t.log_every = o.log_every;
  t.eval_strategy = eval_strategy_of(o);
  t.eval_every = o.eval_every > 0 ? o.eval_every : o.log_every;
  t.save_every = o.save_every;
  t.save_total_limit = o.save_total_limit;
  t.load_best = o.load_best;
  t.metric = o.metric;
  t.dropout.hidden = static_cast<float>(dropout.hidden);
  t.dropout.attention = static_cast<float>(dropout.attention);
  t.dropout.classifier = static_cast<float>(dropout.classifier);
  t.label_smoothing = static_cast<float>(o.label_smoothing);
  t.optim.weight_decay = o.weight_decay;
  t.optim.decay_all = o.decay_all;
  t.optim.max_grad_norm = o.max_grad_norm;
  t.optim.loss_scaling = o.common.precision == Precision::f16;
  t.optim.scaler.init_scale = static_cast<float>(o.loss_scale_init);
  t.optim.scaler.growth_interval = static_cast<int32_t>(o.loss_scale_growth_interval);
  t.quiet = o.common.quiet;
  t.debug_sync_each_step = o.debug_sync_each_step;
  t.cancel = o.cancel;
  t.graphs = !o.no_graphs;
  t.trace = trace;
  return t;
}

// What a --resume must find unchanged (the trainer checks it against the checkpoint).
json run_identity(const TrainOptions& o, const TrainingData& d, int64_t max_length, const train::TrainerOptions& t,
                  const DropoutProbabilities& dropout, int ranks) {
  json id = {{"model", fs::absolute(o.common.model).lexically_normal().string()},
          {"ranks", ranks},
          {"train_sha256", d.raw_train.sha256},
          {"eval_sha256", d.raw_eval ? d.raw_eval->sha256 : ""},
          {"labels", d.config.id2label},
          {"max_length", max_length},
          {"precision", precision_name(o.common.precision)},
          {"batch_size", t.batch_size},
          {"grad_accum", o.grad_accum},
          {"lr", t.lr},
          {"schedule", train::schedule_name(o.schedule)},
          {"warmup_steps", o.warmup_steps},
          {"warmup_ratio", o.warmup_ratio},
          {"epochs", o.epochs},
          {"max_steps", o.max_steps},
          {"seed", o.seed},
          {"shuffle", t.shuffle},
          {"group_by_length", t.shuffle && t.group_by_length},
          {"dropout", {dropout.hidden, dropout.attention, dropout.classifier}},
          {"label_smoothing", o.label_smoothing},
          {"weight_decay", o.weight_decay},
          {"decay_all", o.decay_all},
          {"max_grad_norm", o.max_grad_norm}};
  if (t.optim.loss_scaling) {  // f16 only: checkpoints of other precisions never had these
    id["loss_scale_init"] = o.loss_scale_init;
    id["loss_scale_growth_interval"] = o.loss_scale_growth_interval;
  }
  return id;
}

// What every checkpoint and the final model carry beside the weights.
train::SaveContext save_context(const ModelTokenizer& mt, const json& config_raw, const HfConfig& config) {
  train::SaveContext save;
  save.config_json = trained_config_json(config_raw, config);
  save.tokenizer_files = tokenizer_files(mt.folder.model_dir);
  // The base's sentence-transformers files, so `stoke embed` on the trained
  // folder pools and normalizes as the base did (not unnormalized mean pooling).
  save.extra_files = sentence_transformers_files(mt.folder.model_dir);
  return save;
}

// ---- the final model, in the output folder itself: the last weights, or with
// --load-best the best evaluation's, from its checkpoint.
void save_final_model(const TrainOptions& o, const train::TrainReport& r, const TrainableEncoder& enc,
                      Backend& backend, const train::SaveContext& save, std::vector<std::string>& notes) {
  const fs::path out(o.output);
  const int64_t n = enc.layout.numel();
  std::vector<float> params(static_cast<size_t>(n));
  backend.copy_to_host(params.data(), enc.master_data(), static_cast<size_t>(n) * 4);
  backend.wait(*backend.record_event());
  train::CheckpointContents c;
  c.layout = &enc.layout;
  c.params = params.data();
  c.config_json = save.config_json;
  c.tokenizer_files = save.tokenizer_files;
  c.extra_files = save.extra_files;
  c.text_files = save.text_files;
  c.frozen = save.frozen_tensors();
  if (o.load_best && r.best_metric && r.best_step != r.steps) {
    const fs::path best = train::checkpoint_path(out, r.best_step);
    train::verify_checkpoint(best);
    std::map<std::string, std::shared_ptr<SafetensorsFile>> files;  // model.safetensors, each Dense module's
    for (const ParamSlot& s : enc.layout.slots()) {
      const train::StoredParam where = train::stored_param(enc.layout, s);
      auto& file = files[where.file];
      if (!file) file = SafetensorsFile::open(best / where.file);
      const StoredTensor* st = file->find(where.name);
      if (!st) throw Error(Errc::format, (best / where.file).string() + ": missing " + where.name);
      copy_stored_as_f32(*st, params.data() + s.offset);
    }
    notes.push_back("--load-best: the model in " + o.output + " is step " + std::to_string(r.best_step) + "'s (" +
                    train::eval_metric_name(o.metric) + " " + std::to_string(*r.best_metric) + ")");
  }
  train::write_model_files(out, c);
}

// ---- what the run did: the summary the CLI prints
void summarize(const TrainOptions& o, const train::TrainReport& r, uint64_t total_syncs, TrainSummary& sum,
               const train::EmbeddingTask* emb_task) {
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
  sum.expected_syncs = r.log_reads + r.evals + r.saves + 1 + r.memory_syncs;
  sum.log_every = o.log_every;
  const int64_t run_steps = r.steps - r.resumed_from_step;
  // The bound, 1 + steps/log_every + evals + saves (the final model
  // is a save), plus a read at each epoch end that is neither a log step nor the last.
  sum.host_sync_bound = 1 + static_cast<uint64_t>(run_steps / std::max<int64_t>(o.log_every, 1)) + r.evals +
                        r.saves + 1 + r.extra_epoch_reads + r.memory_syncs;
  if (emb_task && r.micro_batch_halvings > 0)  // the contrastive batch stays: its mini-batches halve
    sum.notes.push_back("the device had no room for the step's texts at once: continuing with mini-batches of " +
                        std::to_string(emb_task->piece(r.micro_batch_halvings)) + " tokens (halved " +
                        std::to_string(r.micro_batch_halvings) + (r.micro_batch_halvings == 1 ? " time" : " times") +
                        (r.memory_halvings > 0 ? ")" : ", as in the checkpoint's run)"));
  else if (r.memory_halvings > 0)
    sum.notes.push_back(train::memory_halving_note(sum.batch_size, r.micro_batch_halvings));
  else if (r.micro_batch_halvings > 0)  // a resume keeps the halving its checkpoint's run made
    sum.notes.push_back("micro-batches of " + std::to_string(r.micro_batch_examples) + " as in the checkpoint's run (" +
                        train::memory_halving_note(sum.batch_size, r.micro_batch_halvings) + ")");
  sum.last_loss = r.last_loss;
  sum.last_accuracy = r.last_accuracy;
  sum.loss_scaling = r.loss_scaling;
  sum.loss_scale = r.scaler.scale;
  sum.skipped_steps = r.scaler.skipped_steps;
  if (r.last_eval) {
    sum.has_eval = true;
    sum.eval_loss = r.last_eval->loss;
    sum.eval_accuracy = r.last_eval->accuracy;
    sum.eval_macro_f1 = r.last_eval->macro_f1;
    sum.eval_named = r.last_eval->named;
  }
}

// ---- run.json: every setting that affects speed or result, and the throughput
json run_record(const TrainOptions& o, const json& identity, const TrainingData& d, const train::TrainReport& r,
                const TrainSummary& sum) {
  json run;
  run["stoke_version"] = stoke_version();
  run["model"] = json(model_source_json(o.common));
  run["settings"] = identity;
  run["settings"]["base_lr"] = o.lr;
  run["settings"]["lr_scale_from"] = o.lr_scale_from;
  run["settings"]["lr_scale"] = train::lr_scaling_name(o.lr_scale);
  run["settings"]["effective_batch"] = sum.batch_size * sum.ranks * o.grad_accum;
  run["settings"]["batch_size_from"] = o.batch_size_auto ? "auto" : "flag";
  run["settings"]["warmup_steps_used"] = train::warmup_steps_for(r.total_steps, o.warmup_steps, o.warmup_ratio);
  run["settings"]["workers"] = o.common.workers;
  run["settings"]["threads"] = thread_count();
  run["settings"]["device"] = sum.device;
  run["settings"]["log_every"] = o.log_every;
  run["settings"]["eval_strategy"] = train::eval_strategy_name(eval_strategy_of(o));
  run["settings"]["save_every"] = o.save_every;
  run["data"] = {{"train", o.train}, {"train_examples", d.train_examples.size()}, {"eval", o.eval},
                 {"eval_examples", d.eval_examples.size()}, {"truncated", d.stats.truncated},
                 {"skipped", d.raw_train.bad.size() + (d.raw_eval ? d.raw_eval->bad.size() : 0)}};
  run["steps"] = r.steps;
  run["total_steps"] = r.total_steps;
  run["steps_per_epoch"] = r.steps_per_epoch;
  run["epochs"] = r.epochs_done;
  run["resumed_from_step"] = r.resumed_from_step;
  run["throughput"] = {{"samples_per_s", sum.samples_per_s}, {"tokens_per_s", sum.tokens_per_s},
                       {"train_seconds", r.train_seconds},   {"samples", r.samples},
                       {"tokens", r.tokens},                 {"device_busy_seconds", r.device_busy}};
  run["host_syncs"] = sum.host_syncs;
  run["host_sync_reads"] = {{"log", r.log_reads}, {"eval", r.evals}, {"save", r.saves}, {"final_model", 1},
                            {"out_of_memory", r.memory_syncs}};
  // RELIABILITY 10: the micro-batch as it ran (the user's --batch-size stays
  // the run's identity; a halving is kept by every later checkpoint).
  run["micro_batch"] = {{"examples", r.micro_batch_examples},
                        {"memory_halvings", r.micro_batch_halvings},
                        {"memory_halvings_this_run", r.memory_halvings}};
  run["throttle_waits"] = r.throttle_waits;
  if (r.loss_scaling) {  // f16: read with the metrics at the last log step (no extra sync)
    const LossScalerConfig defaults;
    run["loss_scaler"] = {{"init_scale", o.loss_scale_init},
                          {"growth_factor", defaults.growth_factor},
                          {"backoff_factor", defaults.backoff_factor},
                          {"growth_interval", o.loss_scale_growth_interval},
                          {"scale", r.scaler.scale},
                          {"skipped_steps", r.scaler.skipped_steps},
                          {"optimizer_steps", r.scaler.optimizer_steps}};
  }
  // CUDA graphs (docs/training.md "Graphs"): the encoder forward and backward
  // per length bucket, and the optimizer step; "graphed" names the phases
  // that replayed at least once.
  nlohmann::json graphed = nlohmann::json::array();
  if (r.graphs.replayed > 0) {
    graphed.push_back("encoder_forward");
    graphed.push_back("encoder_backward");
  }
  if (r.optimizer_graph.replayed > 0) graphed.push_back("optimizer_step");
  run["graphs"] = {{"used", r.graphs.replayed > 0 || r.optimizer_graph.replayed > 0},
                   {"enabled", !o.no_graphs},
                   {"graphed", graphed},
                   {"capture_failed", r.graphs.capture_failed || r.optimizer_graph.capture_failed},
                   {"buckets_captured", r.graphs.buckets},
                   {"micro_batches_replayed", r.graphs.replayed},
                   {"micro_batches_eager", r.graphs.eager},
                   {"padding_fraction", r.graphs.padded_tokens > 0
                                            ? 1.0 - static_cast<double>(r.graphs.real_tokens) /
                                                        static_cast<double>(r.graphs.padded_tokens)
                                            : 0.0},
                   {"optimizer_steps_replayed", r.optimizer_graph.replayed},
                   {"optimizer_steps_eager", r.optimizer_graph.eager}};
  run["final"] = {{"loss", r.last_loss}, {"accuracy", r.last_accuracy}};
  if (r.last_eval && !r.last_eval->named.empty()) {
    for (const auto& [name, value] : r.last_eval->named) run["final"]["eval_" + name] = value;
  } else if (r.last_eval) {
    run["final"]["eval_loss"] = r.last_eval->loss;
    run["final"]["eval_accuracy"] = r.last_eval->accuracy;
    run["final"]["eval_macro_f1"] = r.last_eval->macro_f1;
  }
  return run;
}


// ---- data parallelism: rank 0 prepares the output folder (lock, fresh /
// resume / overwrite) and tells the others the checkpoint to resume from, or
// its error, which then stops every rank with the same line.
struct OutputAgreement {
  std::optional<TrainOutputStart> start;  // rank 0's (holds the lock)
  fs::path resume_dir;
};
OutputAgreement agree_on_output(const TrainOptions& o, dist::Communicator& comm) {
  OutputAgreement a;
  if (comm.size() == 1) {
    a.start = prepare_train_output(o);
    a.resume_dir = a.start->resume_dir;
    return a;
  }
  std::string message;
  if (comm.rank() == 0) {
    try {
      a.start = prepare_train_output(o);
      message = "=" + a.start->resume_dir.string();
    } catch (const Error& e) {
      message = std::string("!") + e.what();
    }
  }
  message = comm.broadcast(message);
  if (message.empty() || message[0] == '!') {
    comm.fail_together();
    throw Error(Errc::refused, message.empty() ? "rank 0 sent no output folder" : message.substr(1));
  }
  a.resume_dir = message.substr(1);
  return a;
}

// --batch-size auto under data parallelism: each rank measured its own
// memory; all take the smallest, so the rank with the least memory fits.
int64_t smallest_over_ranks(dist::Communicator& comm, int64_t batch, std::vector<std::string>& notes) {
  const std::vector<uint8_t> all = comm.allgather(&batch, sizeof batch);
  int64_t smallest = batch;
  for (size_t r = 0; r < all.size() / sizeof batch; ++r) {
    int64_t b = 0;
    std::memcpy(&b, all.data() + r * sizeof b, sizeof b);
    smallest = std::min(smallest, b);
  }
  if (smallest != batch)
    notes.push_back("--batch-size auto: " + std::to_string(smallest) + " on every rank (the smallest any rank fits)");
  return smallest;
}

// The gradient all-reduce on a GPU: NCCL, bootstrapped from a unique id
// rank 0 makes and MPI carries to the others (rank 0's failure to make one
// stops every rank with its line). Null on the CPU backend (MPI on the
// executor) and in one process; a device without NCCL in this build was
// refused by dist::gradient_path before.
std::unique_ptr<DeviceAllReduce> open_device_allreduce(dist::GradientPath path, Backend& backend,
                                                       dist::Communicator& comm, const TrainOptions& o) {
  if (path != dist::GradientPath::device) return nullptr;
#ifdef STOKE_HAVE_NCCL
  std::string id;
  if (comm.rank() == 0) {
    try {
      id = "=" + cuda::nccl_unique_id();
    } catch (const Error& e) {
      id = std::string("!") + e.what();
    }
  }
  id = comm.broadcast(id);
  if (id.empty() || id[0] != '=') {
    comm.fail_together();
    throw Error(Errc::io, id.empty() ? "rank 0 sent no NCCL id" : id.substr(1));
  }
  return cuda::open_nccl_allreduce(dynamic_cast<cuda::CudaBackend&>(backend), comm.rank(), comm.size(), id.substr(1),
                                   static_cast<double>(o.comm_timeout));
#else
  (void)backend, (void)comm, (void)o;
  throw Error(Errc::unsupported, "this stoke was built without NCCL");
#endif
}

// Everything that must be equal on every rank: the resume identity plus the
// flags that decide when ranks meet (logging, evaluation, saving).
json rank_settings(const TrainOptions& o, const json& identity) {
  json s = identity;
  s["output"] = fs::absolute(o.output).lexically_normal().string();
  s["log_every"] = o.log_every;
  s["save_every"] = o.save_every;
  s["save_total_limit"] = o.save_total_limit;
  s["eval_strategy"] = train::eval_strategy_name(eval_strategy_of(o));
  s["eval_every"] = o.eval_every;
  s["load_best"] = o.load_best;
  s["metric"] = train::eval_metric_name(o.metric);
  s["bucket_mb"] = o.bucket_mb;
  s["comm_timeout"] = o.comm_timeout;
  s["resume"] = o.resume;
  s["resume_from"] = o.resume_from;
  s["text_field"] = o.common.text_field;
  s["pair_field"] = o.common.pair_field;
  s["label_field"] = o.label_field;
  s["device"] = o.common.device.text();
  return s;
}

}  // namespace

namespace {

TrainSummary train_ranked(const TrainOptions& o, DType dtype, const std::unique_ptr<dist::Communicator>& comm);

}  // namespace

TrainSummary run_train(const TrainOptions& o) {
  const DType dtype = check_train_options(o);
  // One process, or one rank of a data-parallel job (mpirun / srun).
  const std::unique_ptr<dist::Communicator> comm = dist::open_communicator();
  if (comm->size() == 1) return train_ranked(o, dtype, comm);
  // A rank that fails says which it is: the launcher then ends the job (the
  // communicator is not finalised while an error leaves), and the one line
  // that explains it names the rank and the cause.
  const std::string who = "rank " + std::to_string(comm->rank()) + " of " + std::to_string(comm->size()) + ": ";
  try {
    return train_ranked(o, dtype, comm);
  } catch (const Error& e) {
    const std::string line = who + e.what();
    if (!comm->failing_together()) throw Error(e.code(), line);
    // Every rank fails here together, and a launcher ends the whole job at
    // the first rank's exit: each says its line now and waits until all have
    // said theirs, so no rank's line is lost to the launcher's kill.
    std::fprintf(stderr, "stoke: error: %s\n", line.c_str());
    std::fflush(stderr);
    comm->barrier();
    throw ReportedError(e.code(), line);
  } catch (const std::bad_alloc&) {
    throw Error(Errc::device, who + "out of memory (host allocation failed)");
  }
}

namespace {

TrainSummary train_ranked(const TrainOptions& o, DType dtype, const std::unique_ptr<dist::Communicator>& comm) {
  TrainSummary sum;
  sum.output = o.output;
  sum.precision = precision_name(o.common.precision);
  sum.rank = comm->rank();
  sum.ranks = comm->size();
  const bool writer = sum.rank == 0;

  // ---- output folder: locked, then fresh, overwrite, or resume (rank 0 decides)
  const OutputAgreement output = agree_on_output(o, *comm);
  const fs::path resume_dir = output.resume_dir;
  if (output.start) sum.notes = output.start->notes;

  // ---- model, tokenizer, device, threads, data
  ModelTokenizer mt = open_model_tokenizer(o.common.model, o.common.max_length);
  const bool embedding = o.objective != train::Objective::classify;
  if (!embedding) head_activation(*mt.folder.config.arch);  // a head no op computes is refused before the data is read
  const json config_raw = read_json_file(mt.folder.model_dir / "config.json");
  // `--device cuda` under a launcher: each rank its node-local GPU.
  DeviceSpec device = o.common.device;
  if (sum.ranks > 1 && device.kind == DeviceSpec::Kind::cuda && !device.index_given) device.index = dist::local_rank();
  auto backend = open_backend(device, BackendUse::training);
  sum.device = backend->name();
  const dist::BackendTraits traits{sum.device, backend->can_enqueue_host(), sum.device.rfind("cuda", 0) == 0};
  const dist::GradientPath path = dist::gradient_path(sum.ranks, traits, dist::built_with_nccl());
  const std::unique_ptr<DeviceAllReduce> device_allreduce = open_device_allreduce(path, *backend, *comm, o);
  std::unique_ptr<Trace> own_trace = o.common.trace.empty() || o.trace ? nullptr : std::make_unique<Trace>();
  Trace* trace = o.trace ? o.trace : own_trace.get();
  sum.native_bf16 = device_has_native_bf16(sum.device);
  JobThreads threads(*backend, own_trace.get(), trace, o.on_thread_start);
  const JobThreads::Hook& on_thread_start = threads.on_thread_start();
  if (on_thread_start) on_thread_start("trainer");
  if (trace) trace->name_thread("trainer");
  JobGpuUsage gpu(sum.device, trace);  // off (silently) unless cuda:N with NVML
  // An embedding model's data (train/contrastive_data.h); the classifier's
  // TrainingData then carries only what the shared settings read.
  std::optional<EmbeddingTrainingData> emb;
  const TrainingData data = [&] {
    if (!embedding) return read_training_data(o, mt, !resume_dir.empty(), sum);
    emb = read_embedding_training_data(o, mt, sum);
    TrainingData d;
    d.config = mt.folder.config;
    d.raw_train.path = emb->train.path;
    d.raw_train.sha256 = emb->train.sha256;
    d.raw_train.bad = emb->train.bad;
    d.stats = emb->stats;
    return d;
  }();

  // --batch-size auto: planned from the device's free memory before the
  // model takes its share, then tried for real once it has.
  const bool auto_batch = o.batch_size_auto;
  std::string auto_why;
  sum.batch_size = auto_batch ? planned_auto_batch(o, data.config, dtype, mt.max_length, *backend, auto_why)
                              : batch_size_from_flag(o);
  std::unique_ptr<TrainableEncoder> enc =
      load_model(o, resume_dir, data.config, mt.folder, config_raw, *backend, dtype, sum.notes);
  if (auto_batch) sum.batch_size = fitted_auto_batch(sum.batch_size, *enc, *backend, data.train_examples, auto_why, sum.notes);
  std::string mini_note;
  const int64_t mini_batch_tokens =
      emb ? planned_mini_batch_tokens(o, data.config, dtype, *backend, *emb, sum.batch_size, &mini_note) : 0;
  if (!mini_note.empty()) sum.notes.push_back(mini_note);
  if (auto_batch && sum.ranks > 1) sum.batch_size = smallest_over_ranks(*comm, sum.batch_size, sum.notes);
  sum.grad_accum = o.grad_accum;
  sum.base_lr = o.lr;
  sum.lr = learning_rate_for(o, sum.batch_size * sum.ranks, sum.notes);
  sum.global_batch = sum.batch_size * sum.ranks * o.grad_accum;
  sum.bucket_mb = o.bucket_mb;
  if (sum.ranks > 1)
    sum.notes.push_back("data parallel over " + std::to_string(sum.ranks) + " ranks (" + comm->name() +
                        (device_allreduce ? "; gradients summed by " + device_allreduce->name() : std::string()) +
                        "): global batch " + std::to_string(sum.global_batch) + " = --batch-size " +
                        std::to_string(sum.batch_size) + " x " + std::to_string(sum.ranks) + " ranks x --grad-accum " +
                        std::to_string(o.grad_accum));

  // ---- the loop
  const DropoutProbabilities dropout = dropout_rates(o, data.config);
  train::TrainerOptions t = trainer_options(o, sum.batch_size, sum.lr, dropout, trace, *comm);
  t.device_allreduce = device_allreduce.get();
  // An embedding model's evaluation has no loss: --load-best keeps the best
  // by sentence-transformers' headline metric of the set's kind.
  if (emb && emb->eval && !train::is_embedding_metric(t.metric))
    t.metric = emb->eval->kind == train::EvalSetKind::scored_pairs ? train::EvalMetric::spearman_cosine
                                                                   : train::EvalMetric::cosine_ndcg_at_10;
  if (!writer) t.quiet = true;
  t.identity = run_identity(o, data, mt.max_length, t, dropout, sum.ranks);
  if (emb) t.identity.update(embedding_identity(o, *emb));
  dist::check_same_settings(*comm, rank_settings(o, t.identity));
  train::SaveContext save = save_context(mt, config_raw, data.config);
  if (emb) add_embedding_model_files(save, o, mt, *emb, open_model_folder_weights(mt.folder), config_raw);
  std::unique_ptr<train::Trainer> trainer_owner;
  const train::EmbeddingTask* emb_task = nullptr;  // owned by the trainer
  if (emb) {
    auto task = std::make_unique<train::EmbeddingTask>(
        *enc, *backend, embedding_task_options(o, *emb, sum.batch_size, t.dropout, comm.get(), mini_batch_tokens),
        emb->train, emb->texts, emb->eval ? &*emb->eval : nullptr, &emb->eval_texts);
    emb_task = task.get();
    trainer_owner = std::make_unique<train::Trainer>(*enc, *backend, t, std::move(task), emb->eval.has_value(), save);
  } else {
    trainer_owner = std::make_unique<train::Trainer>(*enc, *backend, t, data.train_examples,
                                                     data.raw_eval ? &data.eval_examples : nullptr,
                                                     data.labels.regression, save);
  }
  train::Trainer& trainer = *trainer_owner;
  if (!resume_dir.empty()) {
    trainer.resume_from(resume_dir);
    sum.resumed_from = resume_dir.string();
  }
  const train::TrainReport r = trainer.run();

  const uint64_t syncs_before_save = backend->host_syncs();
  sum.stopped = r.stopped;
  if (r.stopped) {
    // As a kill between saves leaves it, but at the step just saved: no final
    // model, no run.json; --resume continues from the checkpoint.
    sum.steps = r.steps;
    sum.total_steps = r.total_steps;
    sum.output = o.output;
    threads.stop();
    return sum;
  }
  if (writer) save_final_model(o, r, *enc, *backend, save, sum.notes);
  summarize(o, r, r.host_syncs + (backend->host_syncs() - syncs_before_save), sum, emb_task);
  sum.comm_seconds = r.reduce.comm_seconds;
  sum.comm_exposed_seconds = r.reduce.exposed_seconds;
  sum.allreduce_bytes_per_step = r.reduce.bytes_per_step;
  if (!writer) {
    threads.stop();
    comm->barrier();  // rank 0 has written the final model when every rank leaves
    return sum;
  }
  sum.gemm_fallbacks = gemm_fallback_lines(*backend);
  json run = run_record(o, t.identity, data, r, sum);
  if (emb_task) {  // what is in memory at once: mini-batches of tokens, not examples
    run["mini_batch"] = {{"tokens", emb_task->piece(r.micro_batch_halvings)},
                         {"mini_batches_last_step", emb_task->last_mini_batches()},
                         {"memory_halvings", r.micro_batch_halvings},
                         {"memory_halvings_this_run", r.memory_halvings}};
    run["data"]["distinct_texts"] = emb->texts.size();
    run["data"]["train_examples"] = emb->train.examples.size();
  }
  run["gemm_fallbacks"] = gemm_fallback_json(*backend);
  if (!backend->device_is_host()) {  // the device allocator's view (a GPU); the CPU's memory is the process's
    const Backend::MemoryReport m = backend->memory_report();
    run["memory"] = {{"allocated_bytes", m.allocated}, {"reserved_bytes", m.reserved}, {"peak_bytes", m.peak}};
  }
  if (sum.ranks > 1) {
    run["data_parallel"] = {{"ranks", sum.ranks},
                            {"communicator", comm->name()},
                            {"gradient_allreduce", device_allreduce ? device_allreduce->name()
                                                                    : std::string(dist::gradient_path_name(path))},
                            {"global_batch", sum.global_batch},
                            {"bucket_mb", o.bucket_mb},
                            {"allreduce_bytes_per_step", r.reduce.bytes_per_step},
                            {"allreduce_seconds", r.reduce.comm_seconds},
                            {"allreduce_exposed_seconds", r.reduce.exposed_seconds},
                            {"allreduce_overlapped_fraction",
                             r.reduce.comm_seconds > 0 ? 1.0 - r.reduce.exposed_seconds / r.reduce.comm_seconds : 0.0},
                            {"rank0_busy_seconds", r.device_busy}};
  }
  if (const auto g = gpu.finish()) {
    sum.gpu_report = gpu_summary_line(*g);
    run["gpu"] = gpu_summary_json(*g);
  }
  write_file_atomic(fs::path(o.output) / "run.json", run.dump(2) + "\n");
  threads.stop();  // every device span is in the trace from here on
  if (trace && !o.common.trace.empty()) {
    trace->set_metadata(json{{"job", "train"}, {"facts", doctor::to_json(train_facts(sum))}}.dump());
    write_file_atomic(o.common.trace, std::string_view(trace->to_json()));
  }
  comm->barrier();
  return sum;
}

}  // namespace

}  // namespace stoke
