#include "jobs/embed_job.h"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"
#include "core/half.h"
#include "core/progress.h"
#include "core/sha256.h"
#include "core/thread_pool.h"
#include "core/trace.h"
#include "io/atomic_file.h"
#include "io/npy.h"
#include "jobs/batched_encoder.h"
#include "jobs/model_session.h"
#include "jobs/text_records.h"
#include "jobs/version.h"

namespace stoke {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr size_t kWindow = 4096;  // records tokenized, sorted and batched together

PoolingMode to_mode(Pooling p) {
  switch (p) {
    case Pooling::cls: return PoolingMode::cls;
    case Pooling::mean: return PoolingMode::mean;
    case Pooling::max: return PoolingMode::max;
    case Pooling::mean_sqrt_len: return PoolingMode::mean_sqrt_len;
    case Pooling::lasttoken: return PoolingMode::lasttoken;
  }
  return PoolingMode::mean;
}

// Files that make a folder "already holding output" (DESIGN "Output folders").
bool is_output_file(const fs::path& p) {
  const std::string name = p.filename().string();
  return name == "manifest.json" || p.extension() == ".npy" || (name.rfind("ids-", 0) == 0 && p.extension() == ".jsonl") ||
         name == "errors.jsonl";
}

void prepare_output(const fs::path& dir, bool overwrite) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error(Errc::invalid_argument, "--output " + dir.string() + ": is a file (expected a folder)");
  fs::create_directories(dir, ec);
  if (ec) throw Error(Errc::io, "--output " + dir.string() + ": cannot create the folder: " + ec.message());
  std::vector<fs::path> existing;
  for (const auto& entry : fs::directory_iterator(dir))
    if (is_output_file(entry.path())) existing.push_back(entry.path());
  if (existing.empty()) return;
  if (!overwrite)
    throw Error(Errc::refused, "--output " + dir.string() + " already holds output (" +
                                   existing.front().filename().string() + "); use --overwrite to replace it");
  for (const auto& p : existing) fs::remove(p);
}

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

}  // namespace

EmbedSummary run_embed(const EmbedOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.output.empty()) throw Error(Errc::invalid_argument, "--output: an output folder is required");
  if (o.output_dtype != "f32" && o.output_dtype != "f16")
    throw Error(Errc::invalid_argument, "--output-dtype \"" + o.output_dtype + "\": expected f32 or f16");
  if (o.dimensions < 0) throw Error(Errc::invalid_argument, "--dimensions: expected a positive number");
  if (o.max_batch_size <= 0) throw Error(Errc::invalid_argument, "--max-batch-size: expected a positive number");
  std::unique_ptr<Trace> trace = o.common.trace.empty() ? nullptr : std::make_unique<Trace>();

  ModelSession s = open_model_session(o.common, /*need_classifier=*/false);
  const HfConfig& cfg = s.text.folder.config;
  const SentenceTransformersConfig& st = s.text.folder.st;
  PoolingMode pooling = PoolingMode::mean;
  std::string pooling_text = "mean";
  if (!o.pooling.empty()) {
    auto p = pooling_from_name(o.pooling);
    if (!p) throw Error(Errc::invalid_argument, "--pooling " + o.pooling + ": expected cls, mean, max, mean_sqrt_len or lasttoken");
    pooling = to_mode(*p);
    pooling_text = std::string(pooling_name(*p));
  } else if (st.pooling) {
    pooling = to_mode(*st.pooling);
    pooling_text = std::string(pooling_name(*st.pooling));
  }
  const bool normalize = o.normalize.value_or(st.present && st.normalize);
  const std::string prompt = resolve_prompt(o, st);
  const fs::path out_dir(o.output);
  prepare_output(out_dir, o.overwrite);

  ThreadPool pool(o.common.workers > 0 ? static_cast<size_t>(o.common.workers) : 0);
  BatchedEncoderOptions bo;
  bo.batch_tokens = o.common.batch_tokens;
  bo.max_batch_size = o.max_batch_size;
  bo.encode.max_length = static_cast<size_t>(s.text.max_length);
  bo.encode.truncate = true;
  bo.product = EncoderProduct::pooled;
  bo.pooling = pooling;
  bo.normalize = normalize;
  bo.dims = o.dimensions;
  BatchedEncoder encoder(s.encoder, *s.backend, *s.text.tokenizer, bo, pool);
  const int64_t dims = encoder.width();

  // Embeddings never mix pairs: the pair field is not read.
  JsonlTextReader reader(o.common.input, o.common.text_field, "", o.common.id_field);
  Progress progress("embed", reader.total_bytes(), !o.common.quiet);
  std::vector<float> all;
  std::string ids_jsonl;
  EmbedSummary summary;
  std::vector<TextRecord> records(kWindow);
  std::vector<std::string> texts;
  std::vector<TextInput> inputs;
  for (;;) {
    size_t n = 0;
    {
      TraceSpan span(trace.get(), "read");
      while (n < kWindow && reader.next(records[n])) ++n;
    }
    if (n == 0) break;
    texts.clear();
    inputs.clear();
    for (size_t i = 0; i < n; ++i) {
      texts.push_back(prompt + records[i].text);
      summary.replaced_utf8 += records[i].replaced_utf8;
      ids_jsonl += records[i].id_json.empty() ? std::to_string(summary.texts + i) : records[i].id_json;
      ids_jsonl += '\n';
    }
    for (const auto& t : texts) inputs.push_back({t, std::nullopt});
    const size_t first = all.size();
    all.resize(first + n * static_cast<size_t>(dims));
    {
      TraceSpan span(trace.get(), "encode window");
      encoder.run(inputs, all.data() + first);
    }
    summary.texts += n;
    progress.update(summary.texts, reader.bytes_read());
  }
  progress.finish();

  // Files first, the manifest last: the manifest is the commit record.
  const DType out_dtype = o.output_dtype == "f16" ? DType::f16 : DType::f32;
  std::vector<std::byte> bytes;
  if (out_dtype == DType::f32) {
    bytes.resize(all.size() * 4);
    std::memcpy(bytes.data(), all.data(), bytes.size());
  } else {
    bytes.resize(all.size() * 2);
    for (size_t i = 0; i < all.size(); ++i) {
      const f16 h = to_f16(all[i]);
      std::memcpy(bytes.data() + i * 2, &h.bits, 2);
    }
  }
  const fs::path npy_path = out_dir / "embeddings-00000.npy";
  const fs::path ids_path = out_dir / "ids-00000.jsonl";
  write_npy(npy_path, out_dtype, static_cast<int64_t>(summary.texts), dims, bytes);
  write_file_atomic(ids_path, std::string_view(ids_jsonl));

  const auto& es = encoder.stats();
  summary.tokens = es.tokens;
  summary.truncated = es.encode.truncated;
  summary.replaced_utf8 += es.encode.replaced_utf8;
  summary.batches = es.batches;
  summary.dims = dims;
  summary.max_length = s.text.max_length;
  summary.pooling = pooling_text;
  summary.normalize = normalize;
  summary.precision = o.common.precision;
  summary.device = s.device_name;
  summary.host_syncs = s.backend->host_syncs();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const fs::path model_dir = s.text.folder.model_dir;
  json weights_sha = json::array();
  for (const auto& f : s.encoder.weights.files())
    weights_sha.push_back({{"file", f->path().filename().string()}, {"sha256", sha256_file(f->path())}});
  json manifest = {
      {"stoke_version", stoke_version()},
      {"model",
       {{"folder", fs::path(o.common.model).filename().string()},
        {"architecture", cfg.architectures.empty() ? cfg.model_type_name : cfg.architectures[0]},
        {"model_type", cfg.model_type_name},
        {"config_sha256", sha256_file(model_dir / "config.json")},
        {"weights", weights_sha}}},
      {"tokenizer", {{"source", s.text.tokenizer->source}, {"vocab_size", s.text.tokenizer->vocab_size()}}},
      {"pooling", pooling_text},
      {"normalize", normalize},
      {"max_length", s.text.max_length},
      {"dimensions", dims},
      {"prompt", prompt},
      {"precision", o.common.precision},
      {"output_dtype", o.output_dtype},
      {"shards",
       json::array({{{"embeddings", npy_path.filename().string()},
                     {"ids", ids_path.filename().string()},
                     {"rows", summary.texts},
                     {"first_input_index", 0},
                     {"embeddings_sha256", sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()))},
                     {"ids_sha256", sha256_hex(ids_jsonl)}}})},
      {"counts",
       {{"texts", summary.texts},
        {"tokens", summary.tokens},
        {"truncated", summary.truncated},
        {"replaced_utf8", summary.replaced_utf8},
        {"skipped", 0}}},
      {"settings",
       {{"batch_tokens", o.common.batch_tokens},
        {"max_batch_size", o.max_batch_size},
        {"workers", pool.size()},
        {"device", summary.device}}},
      {"run",
       {{"seconds", summary.seconds},
        {"texts_per_second", summary.seconds > 0 ? summary.texts / summary.seconds : 0.0},
        {"tokens_per_second", summary.seconds > 0 ? summary.tokens / summary.seconds : 0.0},
        {"batches", summary.batches},
        {"host_syncs", summary.host_syncs},
        {"tokenize_seconds", es.tokenize_seconds},
        {"compute_wait_seconds", es.compute_wait_seconds}}},
  };
  write_file_atomic(out_dir / "manifest.json", std::string_view(manifest.dump(2) + "\n"));
  if (trace) write_file_atomic(o.common.trace, std::string_view(trace->to_json()));
  return summary;
}

}  // namespace stoke
