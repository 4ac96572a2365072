#include "jobs/classify_job.h"

#include <chrono>
#include <cmath>

#include "core/error.h"
#include "core/json_write.h"
#include "core/progress.h"
#include "core/thread_pool.h"
#include "core/trace.h"
#include "io/atomic_file.h"
#include "jobs/batched_encoder.h"
#include "jobs/model_session.h"
#include "jobs/output_file.h"

namespace stoke {

namespace {

constexpr size_t kWindow = 4096;

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

}  // namespace

ClassifySummary run_classify(const ClassifyOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.max_batch_size <= 0) throw Error(Errc::invalid_argument, "--max-batch-size: expected a positive number");
  std::unique_ptr<Trace> trace = o.common.trace.empty() ? nullptr : std::make_unique<Trace>();
  ModelSession s = open_model_session(o.common, /*need_classifier=*/true);
  const HfConfig& cfg = s.text.folder.config;
  if (cfg.num_labels() < 1) throw Error(Errc::invalid_argument, "config.json: the model has no labels to classify into");
  const Head head = head_for(cfg);
  if (head == Head::regression && cfg.num_labels() != 1)
    throw Error(Errc::unsupported, "config.json: problem_type regression with " + std::to_string(cfg.num_labels()) +
                                       " outputs; stoke reports one raw score");

  ThreadPool pool(o.common.workers > 0 ? static_cast<size_t>(o.common.workers) : 0);
  BatchedEncoderOptions bo;
  bo.batch_tokens = o.common.batch_tokens;
  bo.max_batch_size = o.max_batch_size;
  bo.encode.max_length = static_cast<size_t>(s.text.max_length);
  bo.encode.truncate = true;
  bo.product = EncoderProduct::logits;
  BatchedEncoder encoder(s.encoder, *s.backend, *s.text.tokenizer, bo, pool);
  const size_t C = static_cast<size_t>(encoder.width());

  RecordReader reader(record_reader_options(o.common));
  OutputFile output(o.output);
  Progress progress("classify", reader.total_bytes(), !o.common.quiet);
  ClassifySummary summary;
  std::vector<InputRecord> records(kWindow);
  std::vector<TextInput> inputs;
  std::vector<float> logits;
  std::string out;
  for (;;) {
    size_t n = 0;
    {
      TraceSpan span(trace.get(), "read");
      while (n < kWindow && reader.next(records[n])) {
        if (!records[n].error.empty()) throw Error(Errc::format, describe_bad_record(reader, records[n]));
        ++n;
      }
    }
    if (n == 0) break;
    inputs.clear();
    for (size_t i = 0; i < n; ++i) {
      inputs.push_back({records[i].text, records[i].pair ? std::optional<std::string_view>(*records[i].pair)
                                                         : std::nullopt});
      summary.pairs += records[i].pair.has_value();
    }
    logits.assign(n * C, 0.0f);
    {
      TraceSpan span(trace.get(), "encode window");
      encoder.run(inputs, logits.data());
    }
    out.clear();
    for (size_t i = 0; i < n; ++i) append_result(out, logits.data() + i * C, cfg, head, records[i].id_json);
    output.write(out);
    summary.records += n;
    progress.update(summary.records, reader.bytes_read());
  }
  output.commit();
  progress.finish();
  const auto& es = encoder.stats();
  summary.tokens = es.tokens;
  summary.truncated = es.encode.truncated;
  summary.batches = es.batches;
  summary.host_syncs = s.backend->host_syncs();
  summary.mode = head_name(head);
  summary.device = s.device_name;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (trace) write_file_atomic(o.common.trace, std::string_view(trace->to_json()));
  return summary;
}

}  // namespace stoke
