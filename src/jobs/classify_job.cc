#include "jobs/classify_job.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <optional>

#include "core/error.h"
#include "core/json_write.h"
#include "core/progress.h"
#include "core/trace.h"
#include "jobs/doctor_job.h"
#include "jobs/gpu_usage.h"
#include "jobs/int8_quality.h"
#include "jobs/job_threads.h"
#include "io/atomic_file.h"
#include "pipeline/encode_pipeline.h"
#include "pipeline/input_files.h"
#include "jobs/model_session.h"
#include "jobs/output_file.h"
#include "jobs/skipped_records.h"

namespace stoke {

using json = nlohmann::json;

namespace {


enum class Head { softmax, sigmoid_multi, sigmoid_single, regression };

Head head_for(const HfConfig& c) {
  switch (c.problem_type) {
    case ProblemType::single_label_classification: return Head::softmax;
    case ProblemType::multi_label_classification: return Head::sigmoid_multi;
    case ProblemType::regression: return Head::regression;
    case ProblemType::unspecified: break;
  }
  return c.num_labels() == 1 ? Head::sigmoid_single : Head::softmax;
}

const char* head_name(Head h) {
  switch (h) {
    case Head::softmax: return "softmax";
    case Head::sigmoid_multi: return "sigmoid per label";
    case Head::sigmoid_single: return "sigmoid";
    case Head::regression: return "regression (raw score)";
  }
  return "?";
}

void append_float(std::string& out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  out += std::isfinite(v) ? buf : "null";
}

void append_floats(std::string& out, const float* v, size_t n) {
  out.push_back('[');
  for (size_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    append_float(out, v[i]);
  }
  out.push_back(']');
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

void append_result(std::string& out, const float* logits, const HfConfig& c, Head head, const std::string& id_json) {
  const size_t C = static_cast<size_t>(c.num_labels());
  out += "{";
  if (!id_json.empty()) out += "\"id\": " + id_json + ", ";
  out += "\"logits\": ";
  append_floats(out, logits, C);
  switch (head) {
    case Head::softmax: {
      size_t best = 0;
      double mx = logits[0], sum = 0;
      for (size_t i = 1; i < C; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
      for (size_t i = 0; i < C; ++i) sum += std::exp(logits[i] - mx);
      for (size_t i = 1; i < C; ++i)
        if (logits[i] > logits[best]) best = i;
      out += ", \"label\": ";
      json_append_string(out, c.id2label[best]);
      out += ", \"score\": ";
      append_float(out, std::exp(logits[best] - mx) / sum);
      break;
    }
    case Head::sigmoid_multi: {
      std::string labels = "[", scores = "[";
      bool first = true;
      for (size_t i = 0; i < C; ++i) {
        const double p = sigmoid(logits[i]);
        if (i) scores += ", ";
        append_float(scores, p);
        if (p > 0.5) {
          if (!first) labels += ", ";
          first = false;
          json_append_string(labels, c.id2label[i]);
        }
      }
      out += ", \"labels\": " + labels + "], \"scores\": " + scores + "]";
      break;
    }
    case Head::sigmoid_single:
      out += ", \"label\": ";
      json_append_string(out, c.id2label[0]);
      out += ", \"score\": ";
      append_float(out, sigmoid(logits[0]));
      break;
    case Head::regression:
      out += ", \"score\": ";
      append_float(out, logits[0]);
      break;
  }
  out += "}\n";
}

// The label(s) a row of logits decides, as text, for comparing int8's with
// f32's: the argmax (softmax), each label's p > 0.5 (sigmoid); a regression
// head decides none.
std::function<std::string(const float*)> label_decider(const HfConfig& c, Head head) {
  const size_t C = static_cast<size_t>(c.num_labels());
  switch (head) {
    case Head::softmax:
      return [C](const float* logits) { return std::to_string(std::max_element(logits, logits + C) - logits); };
    case Head::sigmoid_multi:
    case Head::sigmoid_single:
      return [C](const float* logits) {
        std::string on(C, '0');
        for (size_t i = 0; i < C; ++i) on[i] = logits[i] > 0 ? '1' : '0';  // sigmoid(x) > 0.5
        return on;
      };
    case Head::regression: break;
  }
  return {};
}

// --precision int8: the first texts classified by the int8 model and by f32
// (jobs/int8_quality.h); a stream cannot be read twice.
std::optional<ClassifyQuality> int8_classify_quality(const ClassifyOptions& o, const ModelSession& s,
                                                     const EncodePipelineOptions& po, Head head,
                                                     ClassifySummary& summary) {
  if (o.common.input == "-" || is_stream(o.common.input)) {
    summary.notes.push_back("--precision int8: no quality sample (the input is a stream, read once)");
    return std::nullopt;
  }
  const Int8SampleRows rows = run_int8_sample(s, po, /*need_classifier=*/true);
  if (rows.texts == 0) return std::nullopt;
  return classify_quality(rows, label_decider(s.text.folder.config, head));
}

// The head the model's config asks for; refuses a config stoke cannot report.
Head checked_head(const HfConfig& cfg) {
  if (cfg.num_labels() < 1) throw Error(Errc::invalid_argument, "config.json: the model has no labels to classify into");
  const Head head = head_for(cfg);
  if (head == Head::regression && cfg.num_labels() != 1)
    throw Error(Errc::unsupported, "config.json: problem_type regression with " + std::to_string(cfg.num_labels()) +
                                       " outputs; stoke reports one raw score");
  return head;
}

// Logits rows through the same pipeline as embed, written as JSON lines in input order.
class JsonlSink : public RowSink {
 public:
  JsonlSink(OutputFile& out, SkippedRecords& skipped, const HfConfig& cfg, Head head)
      : out_(out), skipped_(skipped), cfg_(cfg), head_(head) {}
  void row(const InputRecord& record, const Encoding&, const float* logits) override {
    line_.clear();
    append_result(line_, logits, cfg_, head_, record.id_json);
    out_.write(line_);
    pairs += record.pair.has_value();
  }
  void skipped(const InputRecord& record) override { skipped_.add(record); }
  uint64_t pairs = 0;

 private:
  OutputFile& out_;
  SkippedRecords& skipped_;
  const HfConfig& cfg_;
  Head head_;
  std::string line_;
};

EncodePipelineOptions classify_pipeline_options(const ClassifyOptions& o, const ModelSession& s, bool skip_bad,
                                                Trace* trace, const JobThreads& threads) {
  EncodePipelineOptions po;
  po.input = record_reader_options(o.common);
  po.pairs = true;
  po.encode.max_length = static_cast<size_t>(s.text.max_length);
  po.encode.truncate = true;
  po.batch_tokens = o.common.batch_tokens;
  po.max_batch_size = o.max_batch_size;
  po.workers = o.common.workers > 0 ? o.common.workers : 1;
  po.skip_bad_records = skip_bad;
  po.product = RowProduct::logits;
  po.trace = trace;
  po.on_thread_start = threads.on_thread_start();
  po.cancel = o.cancel;
  return po;
}

// classify writes no manifest: the trace is its one JSON record of the run,
// with the facts `stoke doctor --trace` reads.
void write_classify_trace(Trace& trace, const ClassifyOptions& o, const ModelSession& s, const PipelineStats& ps,
                          const EncodePipelineOptions& po, const std::optional<GpuSamplerSummary>& gpu_used,
                          const std::optional<ClassifyQuality>& quality) {
  const bool native = device_has_native_bf16(s.device_name);
  json metadata{{"job", "classify"},
                {"facts", doctor::to_json(pipeline_facts(ps, po.workers, po.batch_tokens, po.sort_window,
                                                         precision_name(o.common.precision), native))}};
  if (gpu_used) metadata["gpu"] = gpu_summary_json(*gpu_used);
  if (quality) metadata["quality"] = to_json(*quality);
  trace.set_metadata(metadata.dump());
  write_file_atomic(o.common.trace, std::string_view(trace.to_json()));
}

}  // namespace

ClassifySummary run_classify(const ClassifyOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.max_batch_size <= 0) throw Error(Errc::invalid_argument, "--max-batch-size: expected a positive number");
  const bool skip_bad = o.skip_bad_records;
  std::unique_ptr<Trace> trace = o.common.trace.empty() ? nullptr : std::make_unique<Trace>();
  ModelSession s = open_model_session(o.common, /*need_classifier=*/true);
  JobGpuUsage gpu(s.device_name, trace.get());  // off (silently) unless cuda:N with NVML
  const HfConfig& cfg = s.text.folder.config;
  const Head head = checked_head(cfg);

  // A trace carries the device's op spans and CPU-utilization samples of
  // every stage thread, and the run's facts for `stoke doctor --trace`.
  JobThreads threads(*s.backend, trace.get(), trace.get(), {});
  const EncodePipelineOptions po = classify_pipeline_options(o, s, skip_bad, trace.get(), threads);
  ClassifySummary summary;
  // Before the output file opens: the sample writes nothing.
  if (s.int8) summary.quality = int8_classify_quality(o, s, po, head, summary);
  OutputFile output(o.output);
  SkippedRecords skipped(o.output, o.errors, o.common.input == "-" ? std::string("<stdin>") : o.common.input);
  JsonlSink sink(output, skipped, cfg, head);
  Progress progress("classify", 0, !o.common.quiet);
  const PipelineStats ps = run_encode_pipeline(
      s.encoder, *s.backend, *s.text.tokenizer, po, sink,
      [&](const PipelineProgress& p) { progress.update(p.texts, p.bytes_read, p.tokens); });
  summary.records = ps.texts;
  summary.pairs = sink.pairs;
  summary.cancelled = ps.cancelled;
  output.commit();
  skipped.commit();
  progress.finish(!ps.cancelled);
  summary.read = ps.records;
  if (ps.cancelled) {
    // The pipeline hands on whole windows only, in order: the lines written
    // are those of every record before the first one not handed on.
    const uint64_t prefix = summary.records + skipped.count();
    const std::string where = o.output == "-" ? "stdout" : o.output;
    if (prefix == 0)
      summary.notes.push_back("stopped before the first window of " + std::to_string(po.sort_window) +
                              " records was done (rows are written a whole window at a time, in input order): " +
                              where + " holds no lines; classify has no resume: run it again");
    else
      summary.notes.push_back(
        "stopped: " + where + " holds the lines of the input's first " +
        std::to_string(prefix) + " records, in order (records 0 to " + std::to_string(prefix == 0 ? 0 : prefix - 1) +
        "); classify has no resume: classify the rest from record " + std::to_string(prefix) +
        " on (for JSONL or text input: tail -n +" + std::to_string(prefix + 1) + " INPUT)");
  }
  summary.skipped = skipped.count();
  summary.errors_file = skipped.where();
  summary.tokens = ps.tokens;
  summary.truncated = ps.truncated;
  summary.batches = ps.batches;
  if (ps.memory_halvings > 0) summary.notes.push_back(memory_halving_note(ps, po.batch_tokens));
  summary.host_syncs = ps.host_syncs;
  summary.mode = head_name(head);
  summary.device = s.device_name;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::optional<GpuSamplerSummary> gpu_used = gpu.finish();
  if (gpu_used) summary.gpu_report = gpu_summary_line(*gpu_used);
  if (trace) {
    threads.stop();  // every device span is in the trace from here on
    write_classify_trace(*trace, o, s, ps, po, gpu_used, summary.quality);
  }
  return summary;
}

}  // namespace stoke
