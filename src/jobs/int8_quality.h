// --precision int8, measured, never assumed: before an int8 embed or classify
// does its work, the first records of its input (int8_sample_size of them)
// go through the job's own pipeline settings twice — by the int8 model and by
// the same model in f32 — and the two sets of rows are compared. Embed
// compares centered cosine per text, as `stoke tune` gates int8
// (jobs/tune_embeddings.h), and records it in the manifest's "quality"
// (docs/output-format.md); classify compares labels and logits, in its
// summary. The job's output rows come from its normal pass: the sample is a
// measurement only, and changes nothing it writes. Where an embed's own pass
// hands on the sample's int8 rows before it commits anything, those are the
// int8 side and only the f32 pass is extra (jobs/int8_sample_tee.h).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "jobs/model_session.h"
#include "pipeline/encode_pipeline.h"

namespace stoke {

// Small enough to cost a fraction of a second on a MiniLM-size model and a
// few seconds on bert-base, large enough for the mean to mean something.
constexpr uint64_t kInt8SampleRecords = 256;
// A small job samples a 64th of its records, never fewer than this: the f32
// side costs two to three int8 texts per text, so a 64th keeps the
// measurement near 5% of the job (a 32nd was 8% of a 1,500-text MiniLM job,
// 256 texts were 35%), and the per-text cosines vary by ~5e-4, so the mean of
// 16 is still good to ~1.3e-4 against a threshold of 0.99.
constexpr uint64_t kInt8MinSampleRecords = 16;
constexpr uint64_t kInt8SampleFraction = 64;  // records per sampled record in a small job

// The sample's size for an input of about `records` records (0: unknown or
// large): records / kInt8SampleFraction within [kInt8MinSampleRecords, kInt8SampleRecords].
uint64_t int8_sample_size(uint64_t records);
// About how many records `in` holds, for sizing the sample only: its lines
// (less a header per CSV/TSV file) when every file is regular and they total
// at most 64 MiB, else 0.
uint64_t estimate_input_records(const RecordReaderOptions& in);

// The sample's rows by both models, in record order.
struct Int8SampleRows {
  std::vector<float> reference;  // the f32 model's
  std::vector<float> int8;       // the session's (int8) model's
  int64_t width = 0;
  uint64_t texts = 0;            // rows in each
  double seconds = 0;            // loading the f32 model and both passes
  bool cancelled = false;        // the job's cancel flag stopped it (the rows are then partial)
};

// po: the job's pipeline options (input, prompt, pooling, dims or logits,
// token budget, cancel flag). The sample reads the first records of what
// they read — every task the same ones unless the task reads files of its
// own — skipping bad records (the normal pass then deals with them as
// --on-error says), and records no trace spans. need_classifier: classify.
// sample_records: how many of the first records (int8_sample_size).
Int8SampleRows run_int8_sample(const ModelSession& session, EncodePipelineOptions po, bool need_classifier,
                               uint64_t sample_records = kInt8SampleRecords);

// The f32 side alone, for an embed whose int8 side comes from its own pass
// (jobs/int8_sample_tee.h): the same records and settings as run_int8_sample.
struct F32SampleRows {
  std::vector<float> rows;         // in record order
  std::vector<uint64_t> records;   // each row's record number
  int64_t width = 0;
  double seconds = 0;              // loading the f32 model and its pass
  bool cancelled = false;
};
F32SampleRows run_f32_sample(const ModelSession& session, EncodePipelineOptions po, uint64_t sample_records);

// ---- embed: the manifest's "quality"
struct EmbedQuality {
  uint64_t texts = 0;
  // Per text, after removing the f32 rows' mean vector. One text has no mean
  // to remove (its f32 row is the mean): then these are its plain cosine,
  // and `centered` is false.
  double centered_mean = 1, centered_min = 1;
  bool centered = true;
  double raw_min = 1;                          // plain cosine, the worst text (reported, not gated)
  double threshold = 0.99;                     // --min-centered-cosine
  double seconds = 0;                          // what the sample cost
  bool kept = false;                           // read from the first run's manifest (a resume)
};
EmbedQuality embed_quality(const Int8SampleRows& rows, double threshold);
nlohmann::ordered_json to_json(const EmbedQuality& q);
// The manifest's "quality"; nullopt when it has none, or one this stoke does
// not read (then a resume measures again).
std::optional<EmbedQuality> embed_quality_from_json(const nlohmann::ordered_json& quality);
// "int8 vs f32 on the first 66 texts: centered cosine mean 0.9994, min 0.9987
// (raw cosine min 0.99998); the sample took 0.21 s" (" (measured by the first
// run)" when kept).
std::string embed_quality_line(const EmbedQuality& q);
// One line when the mean is below the threshold, else "".
std::string embed_quality_warning(const EmbedQuality& q);

// ---- classify: labels and logits
struct ClassifyQuality {
  uint64_t texts = 0;
  std::optional<uint64_t> same_labels;  // texts whose label(s) equal f32's; nullopt: a regression head has none
  double max_logit_diff = 0;            // the largest |int8 - f32| over every logit
  double seconds = 0;
};
// label_of: the label(s) a row of logits decides, as text (empty function: no labels).
ClassifyQuality classify_quality(const Int8SampleRows& rows, const std::function<std::string(const float*)>& label_of);
// "int8 vs f32 on the first 66 texts: the same label(s) on 66 of 66, logits
// differ by at most 0.0123; the sample took 0.05 s"
std::string classify_quality_line(const ClassifyQuality& q);
nlohmann::json to_json(const ClassifyQuality& q);

}  // namespace stoke
