// The compute-only yardstick for bench/pipeline/run.sh: the batches `stoke
// embed` would run, pre-tokenized, through the executor alone. Everything the
// pipeline overlaps with compute (reading, tokenizing, sorting, packing,
// writing) happens first, untimed; then only enqueue + result wait is timed,
// the way the pipeline's executor and writer do it: EncoderRunner with 3
// staging slots, 3 output slots, at most 3 batches enqueued and unread. The
// pipeline's wall clock against this one is its efficiency.
//
//   bench_pipeline --model DIR --input FILE.jsonl [--precision f32|bf16]
//                  [--max-length N] [--batch-tokens N] [--max-batch-size N]
//                  [--sort-window N] [--workers N] [--output ROWS.f32]
//   bench_pipeline --cpu-features     {"native_bf16": ..., "bf16": "..."}
//
// Batches are formed as the pipeline forms them (src/pipeline/encode_pipeline.cc):
// windows are the record ranges [kW, (k+1)W), W = --sort-window, and each
// window's lengths go through cut_batches with the same token budget and size
// cap. Prints one JSON line. --output writes the pooled rows in input order as
// raw little-endian f32, so run.sh can check them against `stoke embed`'s.
// Prompts (--prompt, a model's default prompt) are not applied: the benchmark
// model has none.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "cpu/kernels.h"
#include "jobs/model_session.h"
#include "model/encoder.h"
#include "model/packed_batch.h"
#include "pipeline/bucketer.h"
#include "pipeline/record_reader.h"

using namespace stoke;
using Clock = std::chrono::steady_clock;

namespace {

// The pipeline's output slots (kSlots in encode_pipeline.cc): batches enqueued
// and not yet read back.
constexpr size_t kSlots = 3;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Batch {
  PackedBatch packed;
  std::vector<uint32_t> rows;  // record (input order) of each sequence
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_pipeline: stoke embed's batches, pre-tokenized, through the executor alone", "bench_pipeline"};
  app.option_defaults()->always_capture_default();
  CommonOptions common;
  int64_t max_batch_size = 256;  // embed's defaults (jobs/embed_job.h)
  uint64_t sort_window = 65536;
  std::string output;
  bool cpu_features = false;
  app.add_option("--model", common.model, "Model folder");
  app.add_option("--input", common.input, "Input file (as stoke embed --input)");
  app.add_option("--input-format", common.input_format, "jsonl, csv, tsv or text (default: from the file name)");
  app.add_option("--text-field", common.text_field, "Field holding the text");
  app.add_option("--max-length", common.max_length, "Max tokens per sequence (default: as stoke embed resolves it)");
  app.add_option("--device", common.device, "auto, cpu, cuda or cuda:N");
  std::string precision = "f32";  // its words parsed as every job parses them (jobs/precision.h)
  app.add_option("--precision", precision, "f32, bf16 or f16");
  app.add_option("--workers", common.workers, "Tokenizer threads for the untimed preparation (0: one per core)");
  app.add_option("--batch-tokens", common.batch_tokens, "Tokens per batch (token budget)");
  app.add_option("--max-batch-size", max_batch_size, "Sequences per batch at most");
  app.add_option("--sort-window", sort_window, "Records sorted by length together");
  app.add_option("--output", output, "Write the pooled rows, in input order, as raw f32 here");
  app.add_flag("--cpu-features", cpu_features, "Print whether the CPU has native bf16 and exit");
  CLI11_PARSE(app, argc, argv);

  if (cpu_features) {
    std::printf("%s\n", nlohmann::json({{"native_bf16", cpu::cpu_has_native_bf16()}, {"bf16", cpu::cpu_bf16_support()}})
                            .dump()
                            .c_str());
    return 0;
  }
  try {
    if (common.model.empty()) throw Error(Errc::invalid_argument, "--model: a model folder is required");
    common.precision = parse_precision("--precision", precision);
    if (sort_window == 0) throw Error(Errc::invalid_argument, "--sort-window: expected a positive number");
    if (max_batch_size <= 0) throw Error(Errc::invalid_argument, "--max-batch-size: expected a positive number");
    if (common.batch_tokens <= 0) throw Error(Errc::invalid_argument, "--batch-tokens: expected a positive number");

    // ---- untimed: the session, every record read and tokenized, every batch packed
    const auto t_prep = Clock::now();
    ModelSession s = open_model_session(common, /*need_classifier=*/false);
    const double load_s = since(t_prep);
    const SentenceTransformersConfig& st = s.text.folder.st;
    const Pooling pooling = st.pooling.value_or(Pooling::mean);
    const bool normalize = st.present && st.normalize;
    const int64_t width = s.encoder.config.hidden_size;

    RecordReaderOptions ro = record_reader_options(common);
    ro.pair_field.clear();  // as embed: pairs are never read
    RecordReader reader(ro);
    std::vector<InputRecord> records;
    for (InputRecord rec; reader.next(rec);) {
      if (!rec.error.empty()) throw Error(Errc::format, describe_bad_record(reader, rec));
      records.push_back(std::move(rec));
    }
    EncodeOptions eo;
    eo.max_length = static_cast<size_t>(s.text.max_length);
    eo.truncate = true;
    std::vector<TextInput> inputs;
    inputs.reserve(records.size());
    for (const auto& r : records) inputs.push_back(TextInput{r.text, std::nullopt});
    std::unique_ptr<ThreadPool> pool;
    if (common.workers != 1) pool = std::make_unique<ThreadPool>(common.workers > 0 ? common.workers : 0);
    const std::vector<Encoding> enc = s.text.tokenizer->encode_batch(inputs, eo, pool.get());
    pool.reset();  // its threads must not compete with the timed part

    // The pipeline's windows: record numbers [kW, (k+1)W). With no bad
    // records and one task, record r is records[r].
    std::vector<Batch> batches;
    uint64_t tokens = 0;
    for (size_t first = 0; first < records.size(); first += sort_window) {
      const size_t end = std::min<size_t>(records.size(), first + sort_window);
      std::vector<int64_t> lengths(end - first);
      for (size_t i = first; i < end; ++i) lengths[i - first] = static_cast<int64_t>(enc[i].ids.size());
      for (const auto& members : cut_batches(lengths, common.batch_tokens, max_batch_size)) {
        Batch b;
        for (uint32_t m : members) {
          const size_t r = first + m;
          b.packed.add(enc[r].ids, enc[r].type_ids, s.encoder.config);
          b.rows.push_back(static_cast<uint32_t>(r));
          tokens += enc[r].ids.size();
        }
        batches.push_back(std::move(b));
      }
    }
    const double prep_s = since(t_prep);

    // As the pipeline: room for one whole sequence however long, kSlots staging slots.
    EncoderRunner runner(s.encoder, *s.backend,
                         std::max<int64_t>(common.batch_tokens, static_cast<int64_t>(eo.max_length)), max_batch_size,
                         kSlots);
    std::vector<std::unique_ptr<Buffer>> slots;
    for (size_t i = 0; i < kSlots; ++i)
      slots.push_back(s.backend->allocate_host(static_cast<size_t>(max_batch_size * width) * sizeof(float)));
    std::vector<float> rows(records.size() * static_cast<size_t>(width));

    // ---- timed: enqueue every batch, read every result back; never more than
    // kSlots batches unread (the pipeline's free-slot queue), so run() never
    // waits on a staging slot either.
    std::vector<std::shared_ptr<Event>> done(batches.size());
    double wait_s = 0;
    auto collect = [&](size_t i) {  // the writer's half: wait, copy the rows out
      const auto tw = Clock::now();
      s.backend->wait(*done[i]);
      wait_s += since(tw);
      const auto* src = static_cast<const float*>(slots[i % kSlots]->data());
      for (size_t r = 0; r < batches[i].rows.size(); ++r)
        std::memcpy(rows.data() + batches[i].rows[r] * static_cast<size_t>(width), src + r * static_cast<size_t>(width),
                    static_cast<size_t>(width) * sizeof(float));
      done[i].reset();
    };
    const uint64_t syncs0 = s.backend->host_syncs();
    const double busy0 = s.backend->busy_seconds();
    const auto t0 = Clock::now();
    for (size_t i = 0; i < batches.size(); ++i) {
      if (i >= kSlots) collect(i - kSlots);  // frees slot i % kSlots
      EncoderOutputs out;
      out.pooled = static_cast<float*>(slots[i % kSlots]->data());
      out.pooling = pooling;
      out.normalize = normalize;
      out.dims = width;
      done[i] = runner.run(batches[i].packed, out);
    }
    for (size_t i = batches.size() > kSlots ? batches.size() - kSlots : 0; i < batches.size(); ++i) collect(i);
    const double seconds = since(t0);
    const double busy1 = s.backend->busy_seconds();

    if (!output.empty()) {
      std::ofstream f(output, std::ios::binary);
      f.write(reinterpret_cast<const char*>(rows.data()), static_cast<std::streamsize>(rows.size() * sizeof(float)));
      if (!f) throw Error(Errc::io, output + ": could not write the rows");
    }
    nlohmann::json j = {
        {"impl", "bench_pipeline"},
        {"device", s.device_name},
        {"precision", precision_name(common.precision)},
        {"bf16", cpu::cpu_bf16_support()},
        {"max_length", s.text.max_length},
        {"batch_tokens", common.batch_tokens},
        {"max_batch_size", max_batch_size},
        {"sort_window", sort_window},
        {"texts", records.size()},
        {"tokens", tokens},
        {"batches", batches.size()},
        {"seconds", seconds},
        {"texts_per_s", static_cast<double>(records.size()) / seconds},
        {"tokens_per_s", static_cast<double>(tokens) / seconds},
        {"result_wait_seconds", wait_s},
        {"device_busy_seconds", busy0 >= 0 && busy1 >= 0 ? busy1 - busy0 : -1.0},
        {"host_syncs", s.backend->host_syncs() - syncs0},
        {"load_seconds", load_s},
        {"prep_seconds", prep_s},
    };
    std::printf("%s\n", j.dump().c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_pipeline: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
