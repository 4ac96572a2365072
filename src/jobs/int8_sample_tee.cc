#include "jobs/int8_sample_tee.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace stoke {

bool int8_sample_reuses_job_rows(const EncodePipelineOptions& po, uint64_t shard_size, uint64_t sample_records) {
  return po.task_count == 1 && !po.chunks.on() && po.resume_record == 0 && po.max_records == 0 &&
         shard_size >= sample_records;
}

Int8SampleTee::Int8SampleTee(F32SampleRows f32, double threshold, std::function<void(const EmbedQuality&)> on_ready)
    : f32_(std::move(f32)), threshold_(threshold), on_ready_(std::move(on_ready)) {
  for (size_t i = 0; i < f32_.records.size(); ++i) slot_.emplace(f32_.records[i], i);
  int8_.assign(f32_.rows.size(), 0.0f);
}

RowSink& Int8SampleTee::around(RowSink& job_sink) {
  next_ = &job_sink;
  return *this;
}

void Int8SampleTee::take(const InputRecord& record, const float* values) {
  const auto it = slot_.find(record.index);
  if (it == slot_.end()) return;
  const size_t w = static_cast<size_t>(f32_.width);
  std::copy(values, values + w, int8_.begin() + static_cast<std::ptrdiff_t>(it->second * w));
  slot_.erase(it);  // a record's row is taken once
  if (++seen_ < f32_.records.size() || !on_ready_) return;
  Int8SampleRows rows;
  rows.reference = f32_.rows;
  rows.int8 = int8_;
  rows.width = f32_.width;
  rows.texts = f32_.records.size();
  rows.seconds = f32_.seconds;  // what the sample cost: the int8 side was the job's own
  on_ready_(embed_quality(rows, threshold_));
  on_ready_ = nullptr;
}

void Int8SampleTee::row(const InputRecord& record, const Encoding& encoding, const float* values) {
  next_->row(record, encoding, values);
  take(record, values);
}

void Int8SampleTee::row_with_extras(const InputRecord& record, const Encoding& encoding, const float* values,
                                    const RowExtras& extras) {
  next_->row_with_extras(record, encoding, values, extras);
  take(record, values);
}

void Int8SampleTee::chunk_row(const InputRecord& record, const ChunkRow& chunk, const float* values) {
  // int8_sample_reuses_job_rows keeps chunked jobs away: their rows are not the sample's.
  next_->chunk_row(record, chunk, values);
}

void Int8SampleTee::skipped(const InputRecord& record) { next_->skipped(record); }

}  // namespace stoke
