#include "jobs/embed_job.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <set>
#include <thread>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"
#include "core/half.h"
#include "core/progress.h"
#include "core/sha256.h"
#include "core/thread_pool.h"
#include "core/trace.h"
#include "io/atomic_file.h"
#include "io/folder_lock.h"
#include "jobs/doctor_job.h"
#include "jobs/embed_output.h"
#include "jobs/gemm_fallback_report.h"
#include "jobs/gpu_usage.h"
#include "jobs/int8_quality.h"
#include "jobs/int8_sample_tee.h"
#include "jobs/job_threads.h"
#include "jobs/model_session.h"
#include "jobs/model_source_record.h"
#include "jobs/task_environment.h"
#include "model/m3_heads.h"
#include "model/m3_outputs.h"
#include "model/splade_head.h"
#include "core/stop_request.h"
#include "pipeline/batch_journal.h"
#include "pipeline/chunked_requests.h"
#include "pipeline/encode_pipeline.h"
#include "pipeline/input_files.h"
#include "pipeline/shard_writer.h"
#include "text/tokenizer_loader.h"
#include "jobs/version.h"

namespace stoke {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

std::string resolve_prompt(const EmbedOptions& o, const SentenceTransformersConfig& st) {
  if (!o.prompt.empty() && !o.prompt_name.empty())
    throw Error(Errc::invalid_argument, "--prompt and --prompt-name: give one of them");
  std::string prompt = o.prompt;
  std::string name = o.prompt_name.empty() && o.prompt.empty() ? st.default_prompt_name.value_or("") : o.prompt_name;
  if (!name.empty()) {
    auto it = st.prompts.find(name);
    if (it == st.prompts.end()) {
      std::string known;
      for (const auto& [k, v] : st.prompts) known += (known.empty() ? "" : ", ") + k;
      throw Error(Errc::invalid_argument, "--prompt-name " + name + ": the model defines no such prompt (" +
                                              (known.empty() ? std::string("it has none") : "it has: " + known) + ")");
    }
    prompt = it->second;
  }
  if (!prompt.empty() && !st.include_prompt)
    throw Error(Errc::unsupported, "this model's pooling excludes prompt tokens (include_prompt false), which stoke "
                                   "does not do yet; embed without a prompt");
  return prompt;
}

// The embed job's rows go to the shard writer; bad records to errors.jsonl.
class ShardSink : public RowSink {
 public:
  // files: the reader's files, by InputRecord::file. id_names: with
  // --partition files and no --id-field, each file's name as the manifest
  // lists it, by InputRecord::file: a row's id is then {"file", "record"}
  // (its number within that file), the same in every task of the array,
  // where a task-local record number would repeat across tasks.
  ShardSink(ShardWriter& writer, std::vector<std::string> files, std::vector<std::string> id_names = {})
      : writer_(writer), files_(std::move(files)), id_names_(std::move(id_names)) {}
  void row(const InputRecord& record, const Encoding& encoding, const float* values) override {
    const RowCounts counts{encoding.ids.size(), encoding.truncated, record.replaced_utf8};
    if (id_names_.empty() || !record.id_json.empty()) return writer_.add_row(record.index, record.id_json, values, counts);
    writer_.add_row(record.index, file_record_id(record).dump(), values, counts);
  }
  void row_with_extras(const InputRecord& record, const Encoding& encoding, const float* values,
                       const RowExtras& extras) override {
    const RowCounts counts{encoding.ids.size(), encoding.truncated, record.replaced_utf8};
    const std::string id = id_names_.empty() || !record.id_json.empty() ? record.id_json : file_record_id(record).dump();
    writer_.add_row(record.index, id, values, counts, true, &extras);
  }
  // A chunk's ids line (docs/output-format.md "Chunked runs"): the record's
  // id as an unchunked row has it, then where the chunk is in its text. A
  // --pool-chunks row is an unchunked run's line.
  void chunk_row(const InputRecord& record, const ChunkRow& chunk, const float* values) override {
    const RowCounts counts{chunk.tokens, false, chunk.index == 0 || chunk.pooled ? record.replaced_utf8 : 0};
    const bool record_ends = chunk.pooled || chunk.index + 1 == chunk.count;
    json line;
    if (!record.id_json.empty()) {
      line["id"] = json::parse(record.id_json);
    } else if (!id_names_.empty()) {
      line = file_record_id(record);
    } else {
      line["record"] = record.index;
    }
    if (chunk.pooled) {
      if (line.contains("record") && line.size() == 1) return writer_.add_row(record.index, "", values, counts);
      return writer_.add_row(record.index, line.contains("id") ? record.id_json : line.dump(), values, counts);
    }
    line["chunk"] = chunk.index;
    line["chunks"] = chunk.count;
    line["tokens"] = {chunk.span.token_begin, chunk.span.token_end};
    line["bytes"] = {chunk.span.byte_begin, chunk.span.byte_end};
    line["chars"] = {chunk.span.char_begin, chunk.span.char_end};
    writer_.add_row(record.index, line.dump(), values, counts, record_ends);
  }
  json file_record_id(const InputRecord& record) const {
    const std::string& file = record.file < id_names_.size() ? id_names_[record.file] : id_names_.back();
    return json{{"file", file}, {"record", record.file_record}};
  }
  void skipped(const InputRecord& record) override {
    const std::string& file = record.file < files_.size() ? files_[record.file] : files_.back();
    writer_.add_error(json{{"record", record.index}, {"file", file}, {"line", record.line}, {"error", record.error}}
                          .dump());
  }

 private:
  ShardWriter& writer_;
  std::vector<std::string> files_, id_names_;
};


// Hash of the files that decide tokenization, by name, in a fixed order.
std::string tokenizer_sha256(const fs::path& model_dir) {
  Sha256 h;
  std::vector<const char*> names(std::begin(kTokenizerFileNames), std::end(kTokenizerFileNames));
  names.push_back("sentence_bert_config.json");  // its do_lower_case lowercases the input
  for (const char* name : names) {
    std::error_code ec;
    if (!fs::is_regular_file(model_dir / name, ec)) continue;
    h.update(name);
    h.update(std::string_view("\0", 1));
    h.update(sha256_file(model_dir / name));
  }
  return h.hex_digest();
}

json stage_json(const StageTime& t) {
  return {{"busy", t.busy}, {"wait_input", t.wait_input}, {"wait_output", t.wait_output}};
}

// Which stage held the run back, from the busy times: the device when it was
// busy most of the time, else the busiest host stage.
std::string bounding_stage(const PipelineStats& st, bool serial) {
  const double wall = std::max(st.seconds, 1e-9);
  const double device = st.device_busy >= 0 ? st.device_busy : st.result_wait;
  struct Candidate {
    const char* name;
    double busy;
  } c[] = {{"reading", st.read.busy}, {"tokenization", st.tokenize.busy}, {"compute", device},
           {"writing", st.write.busy}};
  const Candidate* best = &c[0];
  for (const auto& x : c)
    if (x.busy > best->busy) best = &x;
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s (busy %.0f%% of the %.2f s run%s)", best->name, 100.0 * best->busy / wall, wall,
                serial ? "; --serial runs the stages one after another" : "");
  return buf;
}

std::string stage_lines(const PipelineStats& st) {
  char buf[900];
  const double wall = std::max(st.seconds, 1e-9);
  std::snprintf(buf, sizeof buf,
                "  stage      busy s   waiting for input s   waiting for output s\n"
                "  read     %8.2f   %19s   %20.2f\n"
                "  tokenize %8.2f   %19.2f   %20.2f\n"
                "  batch    %8.2f   %19.2f   %20.2f  (output slot: the device is behind)\n"
                "  device   %8.2f   %19s   %20s  (%.0f%% busy)\n"
                "  write    %8.2f   %19.2f   %20s  (of the input wait, %.2f s for results)\n",
                st.read.busy, "-", st.read.wait_output, st.tokenize.busy, st.tokenize.wait_input,
                st.tokenize.wait_output, st.batch.busy, st.batch.wait_input, st.batch.wait_output,
                st.device_busy >= 0 ? st.device_busy : 0.0, "-", "-",
                st.device_busy >= 0 ? 100.0 * st.device_busy / wall : 0.0, st.write.busy,
                st.write.wait_input + st.result_wait, "-", st.result_wait);
  return buf;
}

// ---- the flags: every check that needs no file
void check_embed_options(const EmbedOptions& o) {
  if (o.output.empty()) throw Error(Errc::invalid_argument, "--output: an output folder is required");
  if (o.output_dtype != DType::f32 && o.output_dtype != DType::f16)
    throw Error(Errc::invalid_argument, "--output-dtype: expected f32 or f16");
  if (o.dimensions < 0) throw Error(Errc::invalid_argument, "--dimensions: expected a positive number");
  if (o.max_batch_size <= 0) throw Error(Errc::invalid_argument, "--max-batch-size: expected a positive number");
  if (o.sort_window == 0) throw Error(Errc::invalid_argument, "--sort-window: expected a positive number");
  if (o.shard_size == 0) throw Error(Errc::invalid_argument, "--shard-size: expected a positive number");
  if (o.num_shards == 0) throw Error(Errc::invalid_argument, "--num-shards 0: expected at least 1");
  if (o.shard_index >= o.num_shards)
    throw Error(Errc::invalid_argument, "--shard-index " + std::to_string(o.shard_index) +
                                            ": expected 0 to " + std::to_string(o.num_shards - 1) +
                                            " (below --num-shards " + std::to_string(o.num_shards) + ")");
  if (o.resume && o.overwrite) throw Error(Errc::invalid_argument, "--resume and --overwrite: give one of them");
  if (o.chunks.on()) {
    check_chunk_settings(o.chunks.settings);
  } else if (o.chunks.late || o.chunks.pool != ChunkPooling::none || o.chunks.settings.overlap > 0 ||
             o.chunks.settings.boundary != ChunkBoundary::none) {
    throw Error(Errc::invalid_argument, std::string(o.chunks.late ? "--late-chunking"
                                                    : o.chunks.pool != ChunkPooling::none ? "--pool-chunks"
                                                    : o.chunks.settings.overlap > 0 ? "--chunk-overlap"
                                                                                    : "--chunk-boundary") +
                                            ": needs --chunk-tokens N (the chunks' length in tokens)");
  }
}


// The task from the flags, or with --shard-index auto --num-shards auto from
// the scheduler's environment.
TaskAssignment assigned_task(const EmbedOptions& o) {
  if (o.shard_index_auto != o.num_shards_auto)
    throw Error(Errc::invalid_argument,
                std::string(o.shard_index_auto ? "--shard-index auto needs --num-shards auto"
                                               : "--num-shards auto needs --shard-index auto") +
                    " (index and count come from the same scheduler's environment)");
  if (!o.shard_index_auto) {
    TaskAssignment t;
    t.index = o.shard_index;
    t.count = o.num_shards;
    return t;
  }
  return task_from_environment([](const char* name) { return std::getenv(name); }, kMaxEmbedTasks);
}

// ---- the input: one file or stream, or several files, and the ones this task reads
struct InputSet {
  std::vector<std::string> all;  // every file, sorted (pipeline/input_files.h); {"-"} for stdin
  std::vector<size_t> own;       // indexes into `all` this task reads, in order
  bool files_partition = false;  // --partition files
  bool several() const { return all.size() > 1 || files_partition; }
  std::vector<std::string> own_paths() const {
    std::vector<std::string> p;
    for (size_t f : own) p.push_back(all[f]);
    return p;
  }
};

InputSet input_set(const EmbedOptions& o) {
  InputSet in;
  in.all = expand_input_paths(o.common.inputs.empty() ? std::vector<std::string>{o.common.input} : o.common.inputs);
  in.files_partition = o.partition_files;
  if (in.files_partition && in.all == std::vector<std::string>{"-"})
    throw Error(Errc::invalid_argument, "--partition files: needs input files (stdin is one stream; use --partition records)");
  if (in.all.size() > 1) {
    for (const std::string& p : in.all)
      if (is_stream(p))
        throw Error(Errc::invalid_argument, "--input " + p + ": is a stream; several inputs must be regular files");
    if (o.common.input_format.empty())
      for (const std::string& p : in.all)
        if (input_format_for_path(p) != input_format_for_path(in.all[0]))
          throw Error(Errc::invalid_argument,
                      "--input: " + in.all[0] + " and " + p + " have different formats (" +
                          input_format_name(input_format_for_path(in.all[0])) + ", " +
                          input_format_name(input_format_for_path(p)) +
                          "); give files of one format, or --input-format");
  }
  if (in.files_partition) {
    in.own = files_of_task(in.all.size(), o.shard_index, o.num_shards);
  } else {
    for (size_t f = 0; f < in.all.size(); ++f) in.own.push_back(f);
  }
  return in;
}

// The names ids carry under --partition files without --id-field (see
// ShardSink), by the task's own files in reading order; empty otherwise.
std::vector<std::string> file_id_names(const EmbedOptions& o, const InputSet& in) {
  if (!in.files_partition || !o.common.id_field.empty()) return {};
  const std::vector<std::string> names = input_display_names(in.all);
  std::vector<std::string> own;
  for (size_t f : in.own) own.push_back(names[f]);
  if (own.empty()) own.push_back("");  // a task with no file reads /dev/null: no row, no id
  return own;
}

// stdin, a FIFO, a process substitution (/dev/fd/N): read once, as it
// comes. Its size and sha256 are known only at the end, and it cannot be
// read again to check a resumed run against the first.
bool check_input_stream(const EmbedOptions& o, const InputSet& in) {
  if (in.all.size() > 1) return false;  // several inputs are regular files (input_set)
  const bool from_stdin = o.common.input == "-";
  const bool streamed = from_stdin || is_stream(o.common.input);
  if (o.resume && streamed)
    throw Error(Errc::invalid_argument,
                "--resume needs a regular --input file: " + (from_stdin ? std::string("stdin") : o.common.input) +
                    " is a stream, which cannot be read again to check it against what the first run read");
  return streamed;
}

// ---- what the vectors are: pooling (flag, else the model's), normalization, prompt
struct VectorSettings {
  Pooling pooling = Pooling::mean;
  std::string pooling_name = "mean";
  bool normalize = false;
  std::string prompt;
};

VectorSettings vector_settings(const EmbedOptions& o, const SentenceTransformersConfig& st) {
  VectorSettings v;
  if (!o.pooling.empty()) {
    auto p = pooling_from_name(o.pooling);
    if (!p) throw Error(Errc::invalid_argument, "--pooling " + o.pooling + ": expected cls, mean, max, mean_sqrt_len or lasttoken");
    v.pooling = *p;
    v.pooling_name = std::string(pooling_name(*p));
  } else if (st.pooling) {
    v.pooling = *st.pooling;
    v.pooling_name = std::string(pooling_name(*st.pooling));
  }
  v.normalize = o.normalize.value_or(st.present && st.normalize);
  v.prompt = resolve_prompt(o, st);
  return v;
}

// A ColBERT model (PyLate) gives per-token vectors only: --outputs defaults
// to colbert there, and dense or sparse are refused naming why; its lengths
// are its own, not --max-length's.
void resolve_colbert_outputs(EmbedOptions& o, const ModelSession& s) {
  if (!s.text.folder.st.colbert) return;
  const std::string folder = s.text.folder.dir.string();
  if (!o.outputs.given) {
    o.outputs.dense = o.outputs.sparse = false;
    o.outputs.colbert = true;
  }
  if (o.outputs.dense || o.outputs.sparse)
    throw Error(Errc::invalid_argument, std::string("--outputs ") + (o.outputs.dense ? "dense" : "sparse") + ": " +
                                            folder + " is a ColBERT model (PyLate): it gives one vector per token "
                                            "(--outputs colbert), no " + (o.outputs.dense ? "sentence vector" : "sparse weights"));
  if (o.common.max_length)
    throw Error(Errc::invalid_argument, "--max-length: " + folder + " is a ColBERT model; its lengths are "
                                        "query_length / document_length of config_sentence_transformers.json");
}

// A SPLADE sparse encoder (sentence-transformers SparseEncoder: MLMTransformer
// -> SpladePooling) gives sparse rows only: --outputs defaults to sparse there,
// dense and colbert are refused naming why, and its MLM head is loaded
// (model/splade_head.h). --sparse-top-k needs sparse rows.
void resolve_splade_outputs(EmbedOptions& o, ModelSession& s) {
  const auto& splade = s.text.folder.st.splade;
  if (splade) {
    const std::string folder = s.text.folder.dir.string();
    if (!o.outputs.given) {
      o.outputs.dense = o.outputs.colbert = false;
      o.outputs.sparse = true;
    }
    if (o.outputs.dense || o.outputs.colbert)
      throw Error(Errc::invalid_argument, std::string("--outputs ") + (o.outputs.dense ? "dense" : "colbert") + ": " +
                                              folder + " is a SPLADE sparse encoder (sentence-transformers "
                                              "SparseEncoder): it gives sparse rows only (--outputs sparse), no " +
                                              (o.outputs.dense ? "dense sentence vector" : "ColBERT vectors"));
    load_splade_head(s.encoder, s.text.folder, *s.backend);
  }
  if (o.sparse_top_k > 0 && !o.outputs.sparse)
    throw Error(Errc::invalid_argument, "--sparse-top-k " + std::to_string(o.sparse_top_k) +
                                            ": keeps the largest sparse weights, and this run writes no sparse rows "
                                            "(--outputs sparse)");
}

// --outputs sparse / colbert: bge-m3's heads from the model folder
// (model/m3_heads.h), each refused by name when the folder lacks it.
void load_output_heads(const EmbedOptions& o, ModelSession& s) {
  if (!o.outputs.dense && !o.outputs.sparse && !o.outputs.colbert)
    throw Error(Errc::invalid_argument, "--outputs: name at least one of dense, sparse, colbert");
  if (!o.outputs.sparse && !o.outputs.colbert) return;
  if (o.chunks.on())
    throw Error(Errc::unsupported, "--outputs sparse/colbert with --chunk-tokens: chunked runs give dense rows only "
                                   "(--outputs dense)");
  if (s.encoder.splade.present()) return;  // resolve_splade_outputs loaded its head
  const fs::path folder = s.text.folder.model_dir;
  const M3HeadFiles files = find_m3_heads(folder);
  if (o.outputs.sparse && !files.sparse)
    throw Error(Errc::invalid_argument, "--outputs sparse: " + folder.string() + " has no " + kSparseHeadFile +
                                            " (bge-m3's lexical-weight head); this model gives dense rows only");
  if (o.outputs.colbert && !files.colbert && s.encoder.colbert_dense.empty())  // (a ColBERT model has its projection)
    throw Error(Errc::invalid_argument, "--outputs colbert: " + folder.string() + " has no " + kColbertHeadFile +
                                            " (bge-m3's multi-vector head); this model gives dense rows only");
  load_m3_heads(s.encoder, folder, *s.backend);
}

EncodePipelineOptions pipeline_options(const EmbedOptions& o, const InputSet& in, const ModelSession& s,
                                       const VectorSettings& v, Trace* trace, const JobThreads& threads) {
  EncodePipelineOptions po;
  po.input = record_reader_options(o.common);
  po.input.pair_field.clear();  // embeddings never mix pairs: the pair field is not read
  if (in.several()) {
    po.input.format = po.input.format.value_or(input_format_for_path(in.all[0]));
    po.input.paths = in.own_paths();
    // A task with no file of its own (more tasks than files) reads nothing:
    // an empty file stands in, so the run still commits a complete, empty folder.
    if (po.input.paths.empty()) po.input.paths = {"/dev/null"};
  }
  po.prompt = v.prompt;
  po.encode.max_length = static_cast<size_t>(s.text.max_length);
  po.encode.truncate = true;
  po.batch_tokens = o.common.batch_tokens;
  po.max_batch_size = o.max_batch_size;
  po.sort_window = o.sort_window;
  po.workers = o.common.workers > 0 ? o.common.workers : default_workers(s.device_name);
  // Under --partition files the task's files are its share: all their records are its own.
  po.task_index = in.files_partition ? 0 : o.shard_index;
  po.task_count = in.files_partition ? 1 : o.num_shards;
  po.skip_bad_records = o.skip_bad_records;
  po.serial = o.serial;
  po.product = RowProduct::pooled;
  po.pooling = v.pooling;
  po.normalize = v.normalize;
  po.dims = o.dimensions;
  po.chunks = o.chunks;
  if (o.chunks.on()) po.encode.truncate = false;  // chunks cover the whole text
  po.trace = trace;
  po.stop_after_seconds = o.stop_after_seconds;
  po.debug_sync_each_batch = o.debug_sync_each_batch;
  po.on_thread_start = threads.on_thread_start();
  po.cancel = o.cancel;
  return po;
}

// ---- the manifest's fixed part: what the vectors mean, what they came from,
// how they were batched (docs/output-format.md)
// Several files: each one's name and size (a stat), and the SHA-256 of those
// the task reads; size and sha256 are then over the task's files (every file
// under --partition records), sha256 a digest of their names, sizes and
// checksums; listing_sha256 (names and sizes of every file) is the same in
// every task of the job.
json several_inputs_json(const InputSet& in, json input) {
  const std::vector<std::string> names = input_display_names(in.all);
  std::vector<bool> mine(in.all.size(), false);
  for (size_t f : in.own) mine[f] = true;
  json files = json::array();
  Sha256 listing, own;
  uint64_t own_size = 0;
  for (size_t f = 0; f < in.all.size(); ++f) {
    std::error_code ec;
    const uint64_t size = static_cast<uint64_t>(fs::file_size(in.all[f], ec));
    if (ec) throw Error(Errc::not_found, in.all[f] + ": no such input file");
    const std::string line = names[f] + '\0' + std::to_string(size) + '\n';
    listing.update(line);
    json entry = {{"name", names[f]}, {"size", size}, {"sha256", nullptr}};
    if (mine[f]) {
      const std::string sha = sha256_file(in.all[f]);
      entry["sha256"] = sha;
      own.update(sha + ' ' + line);
      own_size += size;
    }
    files.push_back(std::move(entry));
  }
  input["name"] = std::to_string(in.all.size()) + (in.all.size() == 1 ? " file" : " files");
  input["size"] = own_size;
  input["sha256"] = own.hex_digest();
  input["listing_sha256"] = listing.hex_digest();
  input["files"] = std::move(files);
  return input;
}

json input_json(const EmbedOptions& o, const InputSet& in, InputFormat format, bool streamed) {
  const bool from_stdin = o.common.input == "-";
  json input = {{"name", from_stdin ? std::string("<stdin>") : fs::path(o.common.input).filename().string()},
                {"format", input_format_name(format)},
                {"text_field", format == InputFormat::text ? std::string() : o.common.text_field},
                {"id_field", o.common.id_field},
                {"size", nullptr},
                {"sha256", nullptr}};
  if (in.several()) return several_inputs_json(in, std::move(input));
  if (!streamed) {
    std::error_code ec;
    input["size"] = static_cast<uint64_t>(fs::file_size(o.common.input, ec));
    if (ec) throw Error(Errc::not_found, o.common.input + ": no such input file");
    input["sha256"] = sha256_file(o.common.input);
  }
  return input;
}

json model_json(const EmbedOptions& o, const ModelSession& s) {
  const HfConfig& cfg = s.text.folder.config;
  json weights_sha = json::array();
  for (const auto& f : s.encoder.weights.files())
    weights_sha.push_back({{"file", f->path().filename().string()}, {"sha256", sha256_file(f->path())}});
  return {{"folder", fs::path(o.common.model).filename().string()},
          {"architecture", cfg.architectures.empty() ? cfg.model_type_name : cfg.architectures[0]},
          {"model_type", cfg.model_type_name},
          {"config_sha256", sha256_file(s.text.folder.model_dir / "config.json")},
          {"weights", weights_sha},
          {"source", model_source_json(o.common)}};
}

// The run's options as `stoke embed --output DIR --resume` takes them back
// (a --config object: flag -> value): every option of embed's table but the
// output folder's own and those that change nothing in the rows' making
// (--quiet, --trace, --config). Paths are absolute, so a resume from another
// folder finds the same files; a hub id stays as given.
json options_record(const EmbedOptions& o, const InputSet& in) {
  static const std::set<std::string> not_recorded = {"--output", "--resume", "--overwrite", "--quiet", "--trace",
                                                     "--config", "--input", "--model", "--stop-timeout"};
  json r = json::object();
  const std::string model = o.common.model_location && o.common.model_location->hub
                                ? o.common.model_location->given
                                : fs::absolute(o.common.model).lexically_normal().string();
  r["--model"] = model;
  json inputs = json::array();
  for (const std::string& p : in.all) inputs.push_back(p == "-" ? p : fs::absolute(p).lexically_normal().string());
  r["--input"] = inputs;
  for (const Option<EmbedOptions>& e : embed_option_table()) {
    if (!(e.offer & kOfferCli) || !job_takes(e, kEmbedFlags | kEmbedOutputOptions) || not_recorded.count(e.flag))
      continue;
    if (e.flag == "--shard-index" && o.shard_index_auto) {
      r[e.flag] = "auto";
    } else if (e.flag == "--num-shards" && o.num_shards_auto) {
      r[e.flag] = "auto";
    } else if (e.kind == OptionKind::flag) {
      if (e.given && e.given(o)) r[e.flag] = true;
    } else if (e.show) {
      if (const std::string v = e.show(o); !v.empty()) r[e.flag] = v;
    }
  }
  return r;
}

json embed_manifest(const EmbedOptions& o, const InputSet& in, const ModelSession& s, const VectorSettings& v,
                    const EncodePipelineOptions& po, int64_t dims, bool streamed, const std::string& task_source) {
  const InputFormat format = po.input.format.value_or(input_format_for_path(po.input.path));
  json task = {{"index", o.shard_index}, {"count", o.num_shards}, {"source", task_source}};
  // Written only for files, so one-file manifests stay as they were.
  if (in.files_partition) task["partition"] = "files";
  json m = {
      {"format", "stoke-embeddings"},
      {"format_version", 1},
      {"stoke_version", stoke_version()},
      {"complete", false},
      {"model", model_json(o, s)},
      {"tokenizer",
       {{"source", s.text.tokenizer->source},
        {"vocab_size", s.text.tokenizer->vocab_size()},
        {"sha256", tokenizer_sha256(s.text.folder.model_dir)}}},
      {"pooling", v.pooling_name},
      {"normalize", v.normalize},
      {"max_length", s.text.max_length},
      {"dimensions", dims},
      {"prompt", v.prompt},
      {"precision", precision_name(o.common.precision)},
      // The device kind (cpu, cuda), not the card: a CPU and a GPU round the
      // same precision differently, so their rows must not share an output.
      {"device", s.device_name.substr(0, s.device_name.find(':'))},
      {"output_dtype", o.output_dtype == DType::f16 ? "f16" : "f32"},
      {"input", input_json(o, in, format, streamed)},
      {"task", task},
      {"settings",
       {{"batch_tokens", o.common.batch_tokens},
        {"max_batch_size", o.max_batch_size},
        {"sort_window", o.sort_window},
        {"shard_size", o.shard_size},
        {"workers", po.workers},
        {"device", s.device_name},
        {"threads", std::thread::hardware_concurrency()},  // compute threads (OpenMP uses every core)
        {"on_error", o.skip_bad_records ? "skip" : "stop"},
        {"serial", o.serial}}},
      {"options", options_record(o, in)},
  };
  // What an ids line holds when it is not the record number or the
  // --id-field value (docs/output-format.md): written only then.
  if (!file_id_names(o, in).empty()) m["ids"] = "file_record";
  // Written only when a row gives more than its dense vector (identity fields).
  if (!o.outputs.only_dense()) {
    json outputs = {{"dense", o.outputs.dense}};
    if (o.outputs.sparse && s.encoder.splade.present()) {  // SPLADE: the pooling that shapes its rows
      const SpladeModule& sp = s.encoder.splade.pooling;
      outputs["sparse"] = {{"source", "splade"},
                           {"inference_free", !s.encoder.splade.static_query.empty()},
                           {"pooling", splade_strategy_name(sp.strategy)},
                           {"activation", splade_activation_name(sp)},
                           {"top_k", o.sparse_top_k},
                           {"columns", s.encoder.splade.vocab()},
                           {"format", "csr"}};
      // Inference-free: queries and documents are computed apart (the role is an identity field).
      if (!s.encoder.splade.static_query.empty()) outputs["sparse"]["role"] = text_role_name(o.role);
    } else if (o.outputs.sparse)
      outputs["sparse"] = {{"head", kSparseHeadFile},
                           {"head_sha256", sha256_file(s.text.folder.model_dir / kSparseHeadFile)},
                           {"columns", s.text.tokenizer->vocab_size()},
                           {"format", "csr"}};
    if (o.outputs.sparse && o.sparse_top_k > 0) outputs["sparse"]["top_k"] = o.sparse_top_k;  // (bge-m3: only when set)
    if (o.outputs.colbert && !s.encoder.colbert_dense.empty()) {  // PyLate: the settings that shape its vectors
      const ColbertSettings& c = po.extras.colbert_model;
      json projection = json::array();  // each Dense module's weights
      for (const DenseModule& d : s.text.folder.st.dense)
        projection.push_back(sha256_file(s.text.folder.dir / d.path / "model.safetensors"));
      outputs["colbert"] = {{"source", "colbert"},
                            {"projection_sha256", projection},
                            {"dim", s.encoder.colbert_dense.back().w.dim(0)},
                            {"role", text_role_name(o.role)},
                            {"query_length", c.query_length},
                            {"document_length", c.document_length},
                            {"query_prefix", c.query_prefix},
                            {"document_prefix", c.document_prefix},
                            {"do_query_expansion", c.do_query_expansion},
                            {"attend_to_expansion_tokens", c.attend_to_expansion_tokens},
                            {"skiplist_ids", c.skiplist_ids},
                            {"format", "ragged"}};
    } else if (o.outputs.colbert) {
      outputs["colbert"] = {{"head", kColbertHeadFile},
                            {"head_sha256", sha256_file(s.text.folder.model_dir / kColbertHeadFile)},
                            {"dim", s.encoder.m3.colbert_dim()},
                            {"format", "ragged"}};
    }
    m["outputs"] = std::move(outputs);
  }
  // Written only for chunked runs, so other manifests stay as they were.
  if (o.chunks.on())
    m["chunking"] = {{"tokens", o.chunks.settings.tokens},
                     {"overlap", o.chunks.settings.overlap},
                     {"boundary", chunk_boundary_name(o.chunks.settings.boundary)},
                     {"late", o.chunks.late},
                     {"pool", chunk_pooling_name(o.chunks.pool)}};
  return m;
}

// ---- the summary before any work: what the output start found, what the vectors are
EmbedSummary starting_summary(const EmbedOptions& o, const ModelSession& s, const VectorSettings& v, int64_t dims,
                              const EmbedOutputStart& begin, const FolderLock& lock, bool streamed) {
  EmbedSummary summary;
  summary.notes = begin.notes;
  if (const std::string note = lock.note(); !note.empty()) summary.notes.insert(summary.notes.begin(), note);
  if (streamed)
    summary.notes.push_back(std::string(o.common.input == "-" ? "stdin" : o.common.input) +
                            " is a stream: its size and sha256 are taken as it is read, and this run cannot be "
                            "resumed (--resume needs a regular file)");
  summary.dims = dims;
  summary.max_length = s.text.max_length;
  summary.pooling = v.pooling_name;
  summary.normalize = v.normalize;
  summary.precision = precision_name(o.common.precision);
  summary.device = s.device_name;
  if (begin.already_complete) {
    summary.already_complete = true;
    summary.texts = begin.committed.rows;
    summary.shards = begin.committed.shards.size();
  }
  return summary;
}

// --precision int8: the manifest's "quality" — kept from the first run on a
// resume, else measured on the first records (jobs/int8_quality.h) before
// anything is committed, so every manifest of the folder that names a shard
// carries it. Where the job's own pass gives the sample's int8 rows first
// (jobs/int8_sample_tee.h), only the f32 side runs here and the returned tee
// completes the measurement from the rows it passes on. A stream cannot be
// read twice: no sample then, and a note says so.
std::unique_ptr<Int8SampleTee> record_int8_quality(const EmbedOptions& o, const ModelSession& s,
                                                   const EncodePipelineOptions& po, const EmbedOutputStart& begin,
                                                   bool streamed, json& manifest, EmbedSummary& summary) {
  std::optional<EmbedQuality> q = embed_quality_from_json(begin.quality);
  if (q) {
    manifest["quality"] = begin.quality;
  } else {
    if (!o.int8_quality_sample) return nullptr;
    if (streamed) {
      summary.notes.push_back("--precision int8: no quality sample (the input is a stream, read once); `stoke tune "
                              "embed` on a file measures int8 against f32");
      return nullptr;
    }
    const uint64_t n = int8_sample_size(estimate_input_records(po.input));
    if (int8_sample_reuses_job_rows(po, o.shard_size, n)) {
      F32SampleRows f32 = run_f32_sample(s, po, n);
      summary.cancelled = f32.cancelled;
      if (f32.cancelled || f32.records.empty()) return nullptr;
      // Runs on the writer thread, before the commit that holds the sample's last row.
      return std::make_unique<Int8SampleTee>(std::move(f32), o.min_centered_cosine,
                                             [m = &manifest, sum = &summary](const EmbedQuality& got) {
                                               (*m)["quality"] = to_json(got);
                                               sum->quality = got;
                                               if (std::string w = embed_quality_warning(got); !w.empty())
                                                 sum->notes.push_back(w);
                                             });
    }
    const Int8SampleRows rows = run_int8_sample(s, po, /*need_classifier=*/false, n);
    summary.cancelled = rows.cancelled;
    if (rows.cancelled || rows.texts == 0) return nullptr;
    q = embed_quality(rows, o.min_centered_cosine);
    manifest["quality"] = to_json(*q);
  }
  summary.quality = q;
  if (const std::string w = embed_quality_warning(*q); !w.empty()) summary.notes.push_back(w);
  return nullptr;
}

// This task's records among the first `records` (record r is task r mod N's).
struct TaskShare {
  uint64_t count, index;
  uint64_t own(uint64_t records) const { return records > index ? (records - index + count - 1) / count : 0; }
};

// The shard writer's commit: the fixed part with the commit point, counts and
// (once known) the run's figures. By reference: the run fills `run_info`, and
// a streamed input's fingerprint, in before the last commit.
// Once the manifest covers them, the kept rows of finished batches go
// (pipeline/batch_journal.h).
std::function<void(const CommitPoint&)> manifest_writer(const fs::path& out_dir, const json& manifest,
                                                        const json& run_info, TaskShare share, BatchJournal* journal) {
  return [&manifest, &run_info, out_dir, share, journal](const CommitPoint& point) {
    json m = manifest;
    m["complete"] = point.complete;
    m["shards"] = shards_to_json(point.shards);
    m["committed"] = {{"rows", point.rows}, {"records", point.records}, {"errors_bytes", point.errors_bytes}};
    json counts = committed_counts(point);
    counts["records"] = point.records;
    counts["other_tasks"] = point.records - share.own(point.records);
    m["counts"] = counts;
    if (!run_info.empty()) m["run"] = run_info;
    write_file_atomic(out_dir / "manifest.json", std::string_view(m.dump(2) + "\n"));
    if (!journal) return;
    if (point.complete)
      journal->forget_all();
    else
      journal->forget_before(point.records);
  };
}

// What fixes the rows of a run (the manifest's identity fields) and their
// width, as one digest: the kept rows of another run's batches are never taken.
std::string rows_identity(const json& manifest, int64_t dims) {
  Sha256 h;
  for (const std::string& field : embed_identity_fields()) {
    const json::json_pointer ptr(field);
    h.update(field + "=" + (manifest.contains(ptr) ? manifest.at(ptr).dump() : std::string("null")) + "\n");
  }
  h.update("width=" + std::to_string(dims));
  return h.hex_digest();
}

// The line a stop prints: what is kept, and the command that goes on.
std::string stopped_note(const CommitPoint& committed, uint64_t kept_beyond, const fs::path& out_dir,
                         const PipelineStats& ps, uint64_t total_bytes) {
  std::string where;
  if (ps.input_bytes > 0 && total_bytes > 0 && ps.input_bytes >= total_bytes)
    where = " of the input's " + std::to_string(ps.records) + " records";
  else if (total_bytes > 0)
    where = " (" + std::to_string(static_cast<int>(100.0 * static_cast<double>(ps.input_bytes) /
                                                   static_cast<double>(total_bytes))) +
            "% of the input read)";
  return "stopped: " + std::to_string(committed.rows + kept_beyond) + " rows kept" + where + " — " +
         std::to_string(committed.rows) + " in " + std::to_string(committed.shards.size()) + " committed shards, " +
         std::to_string(kept_beyond) + " in finished batches (partial-*.rows); go on with: stoke embed --output " +
         out_dir.string() + " --resume";
}

// ---- what the run did: the summary the CLI prints, and the manifest's "run"
void summarize(const PipelineStats& ps, const EncodePipelineOptions& po, const EmbedOptions& o,
               const ModelSession& s, EmbedSummary& summary) {
  summary.texts = ps.texts;
  summary.chunked_records = ps.chunked_records;
  summary.tokens = ps.tokens;
  summary.truncated = ps.truncated;
  summary.replaced_utf8 = ps.replaced_utf8;
  summary.batches = ps.batches;
  summary.records = ps.records;
  summary.skipped = ps.skipped;
  summary.other_tasks = ps.other_tasks;
  summary.resumed = ps.resumed;
  summary.host_syncs = ps.host_syncs;
  summary.padding_efficiency =
      ps.computed_tokens > 0 ? static_cast<double>(ps.real_tokens) / static_cast<double>(ps.computed_tokens) : 1.0;
  summary.bound_by = bounding_stage(ps, o.serial);
  summary.pipeline = ps;
  summary.workers = po.workers;
  summary.batch_tokens = po.batch_tokens;
  if (ps.memory_halvings > 0) summary.notes.push_back(memory_halving_note(ps, po.batch_tokens));
  summary.sort_window = po.sort_window;
  summary.native_bf16 = device_has_native_bf16(s.device_name);
  summary.stage_report = stage_lines(ps);
}

json run_json(const PipelineStats& ps, const EmbedSummary& summary) {
  // One definition of each figure (docs/output-format.md "Figures"), the
  // terminal's summary the same: rates are over `seconds`, the job's wall
  // time from its start (model load included) to its last shard; the
  // pipeline's own time and rates are beside them, named so.
  const auto rate = [](uint64_t n, double secs) { return secs > 0 ? static_cast<double>(n) / secs : 0.0; };
  return {{"seconds", summary.seconds},
          {"texts_per_second", rate(ps.texts, summary.seconds)},
          {"tokens_per_second", rate(ps.tokens, summary.seconds)},
          {"pipeline_seconds", ps.seconds},
          {"pipeline_texts_per_second", rate(ps.texts, ps.seconds)},
          {"pipeline_tokens_per_second", rate(ps.tokens, ps.seconds)},
          {"device_texts", ps.submitted_texts},
          {"kept_rows_taken", ps.kept_rows},
          {"batches", ps.batches},
          {"batch_tokens_used", ps.batch_tokens},
          {"host_syncs", ps.host_syncs},
          {"padding_efficiency", summary.padding_efficiency},
          {"resumed_records", ps.resumed},
          {"bound_by", summary.bound_by},
          {"stages",
           {{"read", stage_json(ps.read)},
            {"tokenize", stage_json(ps.tokenize)},
            {"batch", stage_json(ps.batch)},
            {"device", {{"busy", ps.device_busy}, {"result_wait", ps.result_wait}}},
            {"write", stage_json(ps.write)}}}};
}

}  // namespace

EmbedSummary run_embed(const EmbedOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const TaskAssignment task = assigned_task(options);
  EmbedOptions o = options;
  o.shard_index = task.index;
  o.num_shards = task.count;
  check_embed_options(o);
  const InputSet in = input_set(o);
  if (in.all.size() == 1) o.common.input = in.all[0];
  const bool streamed = check_input_stream(o, in);
  std::unique_ptr<Trace> own_trace = o.common.trace.empty() || o.trace ? nullptr : std::make_unique<Trace>();
  Trace* trace = o.trace ? o.trace : own_trace.get();
  // One writer per folder, from before anything in it is looked at (a
  // --resume must not clear a live run's temp files) to the last manifest.
  const fs::path out_dir(o.output);
  if (std::error_code ec; fs::exists(out_dir, ec) && !fs::is_directory(out_dir, ec))
    throw Error(Errc::invalid_argument, "--output " + o.output + ": is a file (expected a folder)");
  const FolderLock lock = FolderLock::acquire(out_dir, "embed");

  ModelSession s = open_model_session(o.common, /*need_classifier=*/false);
  resolve_colbert_outputs(o, s);
  resolve_splade_outputs(o, s);
  load_output_heads(o, s);
  JobThreads threads(*s.backend, own_trace.get(), trace, o.on_thread_start);
  JobGpuUsage gpu(s.device_name, trace);  // off (silently) unless cuda:N with NVML
  const VectorSettings v = vector_settings(o, s.text.folder.st);
  if (o.chunks.late) check_late_chunking_model(s.encoder, v.pooling);
  EncodePipelineOptions po = pipeline_options(o, in, s, v, trace, threads);
  if (o.outputs.sparse || o.outputs.colbert) {
    po.extras = text_output_settings(s.encoder, s.text.folder.model_dir, *s.text.tokenizer, o.outputs.sparse,
                                     o.outputs.colbert, o.role, o.sparse_top_k);
  }
  const int64_t dims = pipeline_row_width(s.encoder, po);
  json manifest = embed_manifest(o, in, s, v, po, dims, streamed, task.source);

  const EmbedOutputStart begin = prepare_embed_output(out_dir, o.resume, o.overwrite, manifest);
  EmbedSummary summary = starting_summary(o, s, v, dims, begin, lock, streamed);
  if (task.source != "flags")
    summary.notes.push_back("task " + std::to_string(task.index) + " of " + std::to_string(task.count) + " from " +
                            task.source + " (" + task.detail + ")");
  if (begin.already_complete) {
    summary.quality = embed_quality_from_json(begin.quality);
    return summary;
  }
  po.resume_record = begin.committed.records;
  std::unique_ptr<Int8SampleTee> quality_tee;
  if (s.int8) quality_tee = record_int8_quality(o, s, po, begin, streamed, manifest, summary);
  if (summary.cancelled) return summary;  // nothing committed yet

  const TaskShare share = in.files_partition ? TaskShare{1, 0} : TaskShare{o.num_shards, o.shard_index};
  // A stream cannot be resumed: nothing of its batches is worth keeping.
  // The journal keeps fixed-width rows: with sparse / ColBERT outputs a stop keeps what shards committed.
  std::unique_ptr<BatchJournal> journal =
      streamed || !o.outputs.only_dense()
          ? nullptr
          : std::make_unique<BatchJournal>(out_dir, rows_identity(manifest, dims), dims, o.sort_window);
  if (journal) {
    if (!journal->cleanup_note().empty()) summary.notes.push_back(journal->cleanup_note());
    if (const uint64_t found = journal->rows_kept_from(begin.committed.records); found > 0)
      summary.notes.push_back("resuming with " + std::to_string(found) +
                              " rows of finished batches the earlier run kept: they are not computed again");
    po.journal = journal.get();
  }
  json run_info = json::object();
  const auto write_manifest = manifest_writer(out_dir, manifest, run_info, share, journal.get());
  // The first manifest before any work: the folder says from the start
  // which run it holds (and --resume finds its settings and kept batches).
  if (!streamed) write_manifest(begin.committed);
  ShardOutputs shard_outputs;
  shard_outputs.dense = o.outputs.dense;
  if (o.outputs.sparse)
    shard_outputs.sparse_columns = s.encoder.splade.present() ? s.encoder.splade.vocab() : s.text.tokenizer->vocab_size();
  if (o.outputs.colbert)
    shard_outputs.colbert_dim = text_output_sources(s.encoder, s.text.tokenizer->vocab_size()).colbert_dim;
  ShardWriter writer(out_dir, o.output_dtype, dims, o.shard_size, begin.committed, write_manifest, shard_outputs);
  ShardSink sink(writer,
                 in.several() ? po.input.paths
                              : std::vector<std::string>{o.common.input == "-" ? std::string("<stdin>") : o.common.input},
                 file_id_names(o, in));
  Progress progress("embed", streamed ? 0 : manifest["input"]["size"].get<uint64_t>(), !o.common.quiet);
  // A resume counts what the earlier run committed as done: the bar goes on
  // from there to 100%, and the rate is this run's.
  const uint64_t committed_before = begin.committed.rows + begin.committed.skipped;
  progress.set_done_before(begin.committed.rows);
  if (o.chunks.on()) progress.set_unit(o.chunks.pool == ChunkPooling::none ? "chunks" : "records");
  auto on_progress = [&](const PipelineProgress& p) {
    // Done fraction: this task's texts against its share of the records read.
    const double own = static_cast<double>(std::max<uint64_t>(1, share.own(p.records)));
    const double frac = std::min(1.0, static_cast<double>(p.texts + committed_before) / own);
    progress.update(p.texts, static_cast<uint64_t>(frac * static_cast<double>(p.bytes_read)), p.tokens);
  };
  RowSink& rows_to = quality_tee ? quality_tee->around(sink) : sink;  // the int8 quality's rows taken on the way
  const PipelineStats ps = run_encode_pipeline(s.encoder, *s.backend, *s.text.tokenizer, po, rows_to, on_progress);
  progress.finish(!ps.cancelled && !ps.stopped_early);

  summarize(ps, po, o, s, summary);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (ps.cancelled) {
    // As a kill leaves it: the last commit stands, the open shard is
    // abandoned (the writer removes its temp files), --resume continues.
    summary.cancelled = true;
    summary.shards = writer.committed().shards.size();
    if (journal) {
      journal->sync();
      summary.notes.push_back(stopped_note(writer.committed(), journal->rows_kept_from(writer.committed().records),
                                           out_dir, ps, manifest["input"]["size"].get<uint64_t>()));
    } else {
      summary.notes.push_back("stopped: " + std::to_string(writer.committed().rows) + " rows committed in " +
                              std::to_string(summary.shards) + " shards (a stream cannot be resumed)");
    }
    return summary;
  }
  run_info = run_json(ps, summary);
  run_info["gemm_fallbacks"] = gemm_fallback_json(*s.backend);
  summary.gemm_fallbacks = gemm_fallback_lines(*s.backend);
  if (const auto g = gpu.finish()) {
    summary.gpu_report = gpu_summary_line(*g);
    run_info["gpu"] = gpu_summary_json(*g);
  }
  if (streamed) {
    manifest["input"]["size"] = ps.input_bytes;
    manifest["input"]["sha256"] = ps.input_sha256;
  }
  writer.finish(ps.records);
  summary.shards = writer.committed().shards.size();
  threads.stop();  // every device span is in the trace from here on
  if (trace && !o.common.trace.empty()) {
    trace->set_metadata(json{{"job", "embed"}, {"facts", doctor::to_json(embed_facts(summary))}}.dump());
    write_file_atomic(o.common.trace, std::string_view(trace->to_json()));
  }
  return summary;
}

}  // namespace stoke
