#include "jobs/int8_quality.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "jobs/tune_embeddings.h"

namespace stoke {

namespace {

// The sample's rows, in record order (the pipeline hands them on in order).
class SampleSink : public RowSink {
 public:
  explicit SampleSink(int64_t width) : width_(static_cast<size_t>(width)) {}
  void row(const InputRecord& record, const Encoding&, const float* values) override {
    rows.insert(rows.end(), values, values + width_);
    records.push_back(record.index);
  }
  void skipped(const InputRecord&) override {}
  std::vector<float> rows;
  std::vector<uint64_t> records;

 private:
  size_t width_;
};

std::string texts_phrase(uint64_t texts) {
  return "on the first " + std::to_string(texts) + (texts == 1 ? " text" : " texts");
}

}  // namespace

uint64_t int8_sample_size(uint64_t records) {
  if (records == 0) return kInt8SampleRecords;
  return std::clamp<uint64_t>((records + kInt8SampleFraction - 1) / kInt8SampleFraction, kInt8MinSampleRecords,
                             kInt8SampleRecords);
}

uint64_t estimate_input_records(const RecordReaderOptions& in) {
  namespace fs = std::filesystem;
  const std::vector<std::string> paths = in.paths.empty() ? std::vector<std::string>{in.path} : in.paths;
  constexpr uintmax_t kMaxBytes = uintmax_t{64} << 20;  // counting them costs a few ms
  uintmax_t total = 0;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (p == "-" || !fs::is_regular_file(p, ec)) return 0;
    total += fs::file_size(p, ec);
    if (ec || total > kMaxBytes) return 0;
  }
  uint64_t lines = 0;
  std::vector<char> buf(1 << 16);
  for (const std::string& p : paths) {
    std::ifstream f(p, std::ios::binary);
    uint64_t file_lines = 0;
    char last = '\n';
    while (f.read(buf.data(), static_cast<std::streamsize>(buf.size())) || f.gcount() > 0) {
      const std::streamsize n = f.gcount();
      file_lines += static_cast<uint64_t>(std::count(buf.data(), buf.data() + n, '\n'));
      last = buf[static_cast<size_t>(n - 1)];
    }
    if (last != '\n') ++file_lines;  // a last line without its newline
    const InputFormat format = in.format ? *in.format : input_format_for_path(p);
    if ((format == InputFormat::csv || format == InputFormat::tsv) && file_lines > 0) --file_lines;  // the header
    lines += file_lines;
  }
  return lines;
}

// The job's pipeline options narrowed to the sample: its first records,
// whole, whichever task asks.
EncodePipelineOptions sample_options(EncodePipelineOptions po, uint64_t sample_records) {
  po.max_records = sample_records;
  po.chunks = {};  // the sample's texts whole (truncated): int8 against f32 on the same rows, not the output's
  po.extras.sparse = po.extras.colbert = false;  // dense rows are what is compared (the f32 model has no bge-m3 heads loaded)
  // Record r of the input, whichever task asks: every task of a job reports
  // the same sample (a task reading files of its own samples those).
  po.task_index = 0;
  po.task_count = 1;
  po.resume_record = 0;
  po.skip_bad_records = true;
  po.stop_after_seconds = 0;
  po.debug_sync_each_batch = false;
  po.trace = nullptr;         // the measurement's spans would read as the job's
  po.on_thread_start = nullptr;
  po.journal = nullptr;       // the sample's batches are not the job's
  return po;
}

Int8SampleRows run_int8_sample(const ModelSession& s, EncodePipelineOptions po, bool need_classifier,
                               uint64_t sample_records) {
  const auto t0 = std::chrono::steady_clock::now();
  po = sample_options(std::move(po), sample_records);
  Int8SampleRows out;
  out.width = pipeline_row_width(s.encoder, po);
  SampleSink int8(out.width), reference(out.width);
  PipelineStats ps = run_encode_pipeline(s.encoder, *s.backend, *s.text.tokenizer, po, int8);
  out.cancelled = ps.cancelled;
  if (!out.cancelled) {
    const LoadedEncoder f32 = load_f32_reference(s, need_classifier);
    ps = run_encode_pipeline(f32, *s.backend, *s.text.tokenizer, po, reference);
    out.cancelled = ps.cancelled;
  }
  out.int8 = std::move(int8.rows);
  out.reference = std::move(reference.rows);
  out.texts = out.width > 0 ? std::min(out.int8.size(), out.reference.size()) / static_cast<size_t>(out.width) : 0;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

F32SampleRows run_f32_sample(const ModelSession& s, EncodePipelineOptions po, uint64_t sample_records) {
  const auto t0 = std::chrono::steady_clock::now();
  po = sample_options(std::move(po), sample_records);
  F32SampleRows out;
  out.width = pipeline_row_width(s.encoder, po);
  SampleSink reference(out.width);
  const LoadedEncoder f32 = load_f32_reference(s, /*need_classifier=*/false);
  out.cancelled = run_encode_pipeline(f32, *s.backend, *s.text.tokenizer, po, reference).cancelled;
  out.rows = std::move(reference.rows);
  out.records = std::move(reference.records);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

EmbedQuality embed_quality(const Int8SampleRows& rows, double threshold) {
  const CosineAgreement a = cosine_agreement(rows.reference, rows.int8, rows.width);
  EmbedQuality q;
  q.texts = a.rows;
  // One text: centering leaves its f32 row at zero and its int8 row at the
  // difference, a cosine of 0 that says nothing of int8 (it once warned on
  // every one-text job). Its plain cosine is the measure then.
  q.centered = a.rows != 1;
  q.centered_mean = q.centered ? a.centered_mean : a.worst;
  q.centered_min = q.centered ? a.centered_worst : a.worst;
  q.raw_min = a.worst;
  q.threshold = threshold;
  q.seconds = rows.seconds;
  return q;
}

nlohmann::ordered_json to_json(const EmbedQuality& q) {
  return {{"reference_precision", "f32"},
          {"metric", q.centered ? "centered_cosine" : "cosine"},
          {"sample", "first_records"},
          {"sample_texts", q.texts},
          {"mean", q.centered_mean},
          {"min", q.centered_min},
          {"raw_cosine_min", q.raw_min},
          {"threshold", q.threshold},
          {"seconds", q.seconds}};
}

std::optional<EmbedQuality> embed_quality_from_json(const nlohmann::ordered_json& j) {
  const std::string metric = j.is_object() ? j.value("metric", "") : "";
  if (metric != "centered_cosine" && metric != "cosine") return std::nullopt;
  for (const char* key : {"sample_texts", "mean", "min", "raw_cosine_min", "threshold", "seconds"})
    if (!j.contains(key) || !j[key].is_number()) return std::nullopt;
  EmbedQuality q;
  q.texts = j["sample_texts"].get<uint64_t>();
  q.centered_mean = j["mean"].get<double>();
  q.centered_min = j["min"].get<double>();
  q.raw_min = j["raw_cosine_min"].get<double>();
  q.threshold = j["threshold"].get<double>();
  q.seconds = j["seconds"].get<double>();
  q.centered = metric == "centered_cosine";
  q.kept = true;
  return q;
}

std::string embed_quality_line(const EmbedQuality& q) {
  char buf[320];
  const char* kept = q.kept ? " (measured by the first run)" : "";
  if (!q.centered)
    std::snprintf(buf, sizeof buf, "int8 vs f32 %s: cosine %.5f (one text: nothing to center); the sample took %.2f s%s",
                  texts_phrase(q.texts).c_str(), q.raw_min, q.seconds, kept);
  else
    std::snprintf(buf, sizeof buf,
                  "int8 vs f32 %s: centered cosine mean %.4f, min %.4f (raw cosine min %.5f); the sample took %.2f s%s",
                  texts_phrase(q.texts).c_str(), q.centered_mean, q.centered_min, q.raw_min, q.seconds, kept);
  return buf;
}

std::string embed_quality_warning(const EmbedQuality& q) {
  if (q.texts == 0 || q.centered_mean >= q.threshold) return "";
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "--precision int8: the mean %scosine to f32 %s is %.4f (worst text %.4f), below "
                "--min-centered-cosine %g: these vectors lose more than that allows here; --precision f32 keeps them",
                q.centered ? "centered " : "", texts_phrase(q.texts).c_str(), q.centered_mean, q.centered_min,
                q.threshold);
  return buf;
}

ClassifyQuality classify_quality(const Int8SampleRows& rows, const std::function<std::string(const float*)>& label_of) {
  ClassifyQuality q;
  q.texts = rows.texts;
  q.seconds = rows.seconds;
  const size_t w = static_cast<size_t>(rows.width);
  uint64_t same = 0;
  for (size_t r = 0; r < rows.texts; ++r) {
    const float* a = rows.reference.data() + r * w;
    const float* c = rows.int8.data() + r * w;
    for (size_t k = 0; k < w; ++k) {
      const double d = std::fabs(static_cast<double>(a[k]) - c[k]);
      q.max_logit_diff = std::isnan(d) ? INFINITY : std::max(q.max_logit_diff, d);  // a NaN differs most
    }
    if (label_of) same += label_of(a) == label_of(c);
  }
  if (label_of) q.same_labels = same;
  return q;
}

std::string classify_quality_line(const ClassifyQuality& q) {
  char buf[320];
  const std::string labels =
      q.same_labels ? "the same label(s) on " + std::to_string(*q.same_labels) + " of " + std::to_string(q.texts) + ", "
                    : std::string();
  std::snprintf(buf, sizeof buf, "int8 vs f32 %s: %slogits differ by at most %.4g; the sample took %.2f s",
                texts_phrase(q.texts).c_str(), labels.c_str(), q.max_logit_diff, q.seconds);
  return buf;
}

nlohmann::json to_json(const ClassifyQuality& q) {
  nlohmann::json j = {{"reference_precision", "f32"}, {"sample", "first_records"}, {"sample_texts", q.texts}};
  j["same_labels"] = q.same_labels ? nlohmann::json(*q.same_labels) : nlohmann::json();
  j["max_logit_diff"] = std::isfinite(q.max_logit_diff) ? nlohmann::json(q.max_logit_diff) : nlohmann::json();
  j["seconds"] = q.seconds;
  return j;
}

}  // namespace stoke
