// The int8 side of an embed's quality sample (jobs/int8_quality.h) taken from
// the job's own pass instead of a pass of its own: the tee hands every row on
// to the job's sink and keeps the int8 rows of the sample's records as they
// go by. So the measurement compares the very rows the job writes (bit for
// bit: tests/unit/test_int8_sample_tee.cc) with the f32 rows of the same
// records, and the job embeds the sample in int8 once, not twice.
//
// It applies when the job hands the sample's rows on before it commits
// anything, so that every manifest that names a shard still carries the
// quality (int8_sample_reuses_job_rows); otherwise the sample runs both
// passes beforehand, as it always did.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "jobs/int8_quality.h"
#include "pipeline/encode_pipeline.h"

namespace stoke {

// Whether the job's own pass (po, with shard_size rows per shard) gives the
// sample's int8 rows, the same records in the same form, before its first
// commit: one task (every task of a --partition records job samples records
// 0.., which only task 0 of 1 embeds), texts whole (a chunked job's rows are
// chunks), nothing committed yet (a resume's rows start past the sample),
// and shards of at least `sample_records` rows (rows go on in input order,
// the sample's first).
bool int8_sample_reuses_job_rows(const EncodePipelineOptions& po, uint64_t shard_size, uint64_t sample_records);

class Int8SampleTee : public RowSink {
 public:
  // f32: the sample's f32 rows (run_f32_sample). on_ready runs once, on the
  // writer thread, right after the last of the sample's rows has gone on to
  // the job's sink (so before the commit that holds it).
  Int8SampleTee(F32SampleRows f32, double threshold, std::function<void(const EmbedQuality&)> on_ready);
  // The job's sink; returns this tee, for the pipeline.
  RowSink& around(RowSink& job_sink);

  void row(const InputRecord& record, const Encoding& encoding, const float* values) override;
  void row_with_extras(const InputRecord& record, const Encoding& encoding, const float* values,
                       const RowExtras& extras) override;
  void chunk_row(const InputRecord& record, const ChunkRow& chunk, const float* values) override;
  void skipped(const InputRecord& record) override;

  // The sample's int8 rows as taken from the job's pass, in the f32 rows'
  // order (a row not yet seen is zeros), and whether all have been seen.
  const std::vector<float>& int8_rows() const { return int8_; }
  bool complete() const { return seen_ == f32_.records.size(); }

 private:
  void take(const InputRecord& record, const float* values);

  RowSink* next_ = nullptr;
  F32SampleRows f32_;
  double threshold_;
  std::function<void(const EmbedQuality&)> on_ready_;
  std::unordered_map<uint64_t, size_t> slot_;  // record number -> its row in the sample
  std::vector<float> int8_;
  size_t seen_ = 0;
};

}  // namespace stoke
