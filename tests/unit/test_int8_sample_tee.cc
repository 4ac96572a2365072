// The int8 quality sample taken from the job's own pass (jobs/int8_sample_tee.h):
// the int8 rows it measures are bit for bit the rows the job hands on for
// those records, and those of a fresh int8 pass with the same settings (same
// batches: the pipeline's windows are fixed ranges of records); its quality
// equals the one computed from the f32 rows and that fresh pass; the job's
// sink sees every row as without it. And the sample's size and the
// record-count estimate that sizes it.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "jobs/int8_quality.h"
#include "jobs/int8_sample_tee.h"
#include "jobs/model_session.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

// Every row, in order, with its record number.
class Rows : public RowSink {
 public:
  explicit Rows(int64_t width) : width_(static_cast<size_t>(width)) {}
  void row(const InputRecord& record, const Encoding&, const float* values) override {
    values_.insert(values_.end(), values, values + width_);
    records.push_back(record.index);
  }
  void skipped(const InputRecord&) override { ++skips; }
  // Record r's row (it must be there).
  std::vector<float> of(uint64_t r) const {
    for (size_t i = 0; i < records.size(); ++i)
      if (records[i] == r) return {values_.begin() + static_cast<std::ptrdiff_t>(i * width_),
                                   values_.begin() + static_cast<std::ptrdiff_t>((i + 1) * width_)};
    ADD_FAILURE() << "no row for record " << r;
    return {};
  }
  std::vector<float> values_;
  std::vector<uint64_t> records;
  int skips = 0;

 private:
  size_t width_;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Int8SampleTee, MeasuresTheRowsTheJobWritesBitForBit) {
  CommonOptions c;
  c.model = test::fixture("models/tiny-bert").string();
  c.device = "cpu";
  c.precision = Precision::int8;
  c.workers = 1;
  const ModelSession s = open_model_session(c, /*need_classifier=*/false);
  ASSERT_TRUE(s.int8);
  EncodePipelineOptions po;
  po.input.path = test::fixture("golden/texts.jsonl").string();
  po.encode.max_length = static_cast<size_t>(s.text.max_length);
  po.batch_tokens = 700;  // several batches, of mixed lengths: the sample's records are spread over them
  po.pooling = Pooling::mean;
  po.normalize = true;
  const uint64_t n = int8_sample_size(estimate_input_records(po.input));
  ASSERT_EQ(n, kInt8MinSampleRecords);  // 66 texts: a small job
  ASSERT_TRUE(int8_sample_reuses_job_rows(po, 100000, n));

  F32SampleRows f32 = run_f32_sample(s, po, n);
  ASSERT_EQ(f32.records.size(), n);
  const F32SampleRows f32_copy = f32;
  std::optional<EmbedQuality> got;
  int ready_calls = 0;
  Int8SampleTee tee(std::move(f32), 0.99, [&](const EmbedQuality& q) {
    got = q;
    ++ready_calls;
  });
  const int64_t width = pipeline_row_width(s.encoder, po);
  Rows written(width), fresh(width), alone(width);
  run_encode_pipeline(s.encoder, *s.backend, *s.text.tokenizer, po, tee.around(written));
  run_encode_pipeline(s.encoder, *s.backend, *s.text.tokenizer, po, fresh);
  ASSERT_TRUE(tee.complete());
  ASSERT_EQ(ready_calls, 1);
  ASSERT_TRUE(got.has_value());

  // The job's sink saw what it sees without the tee: every row, the same bits.
  EXPECT_EQ(written.records.size(), 66u);
  EXPECT_TRUE(same_bits(written.values_, fresh.values_));
  EXPECT_EQ(written.records, fresh.records);
  // The sample's int8 rows: the job's own, and a fresh pass's.
  std::vector<float> expected;
  for (uint64_t r : f32_copy.records) {
    const std::vector<float> row = fresh.of(r);
    expected.insert(expected.end(), row.begin(), row.end());
  }
  EXPECT_TRUE(same_bits(tee.int8_rows(), expected));
  // The quality: exactly what the f32 rows and that fresh pass give.
  Int8SampleRows rows;
  rows.reference = f32_copy.rows;
  rows.int8 = expected;
  rows.width = width;
  rows.texts = n;
  const EmbedQuality want = embed_quality(rows, 0.99);
  EXPECT_EQ(got->texts, n);
  EXPECT_EQ(got->centered_mean, want.centered_mean);
  EXPECT_EQ(got->centered_min, want.centered_min);
  EXPECT_EQ(got->raw_min, want.raw_min);
  EXPECT_GE(got->centered_mean, 0.99);
  EXPECT_EQ(got->seconds, f32_copy.seconds);  // the sample cost its f32 side alone
}

TEST(Int8SampleTee, AppliesOnlyWhereTheJobsRowsAreTheSamplesBeforeItsFirstCommit) {
  EncodePipelineOptions po;
  EXPECT_TRUE(int8_sample_reuses_job_rows(po, 256, 256));
  EXPECT_FALSE(int8_sample_reuses_job_rows(po, 20, 32));  // a shard committed before the sample is whole
  po.task_count = 2;
  EXPECT_FALSE(int8_sample_reuses_job_rows(po, 100000, 32));  // task 0 of 2 embeds records 0, 2, 4, ...
  po.task_count = 1;
  po.resume_record = 100;
  EXPECT_FALSE(int8_sample_reuses_job_rows(po, 100000, 32));  // a resume's rows start past the sample
  po.resume_record = 0;
  po.chunks.settings.tokens = 64;
  ASSERT_TRUE(po.chunks.on());
  EXPECT_FALSE(int8_sample_reuses_job_rows(po, 100000, 32));  // a chunked job's rows are chunks
}

TEST(Int8SampleSize, ASixtyFourthOfTheRecordsWithinBounds) {
  EXPECT_EQ(int8_sample_size(0), kInt8SampleRecords);  // unknown or large
  EXPECT_EQ(int8_sample_size(10), kInt8MinSampleRecords);
  EXPECT_EQ(int8_sample_size(1500), 24u);
  EXPECT_EQ(int8_sample_size(8192), 128u);
  EXPECT_EQ(int8_sample_size(16384), 256u);
  EXPECT_EQ(int8_sample_size(20000), kInt8SampleRecords);
}

// One text has no mean to remove: its centered cosine would be 0 whatever
// int8 did (the f32 row is the mean), and every one-text job warned. Its
// plain cosine is reported and gated instead, and the manifest says so.
TEST(Int8Quality, OneTextIsMeasuredByItsPlainCosine) {
  Int8SampleRows rows;
  rows.width = 4;
  rows.texts = 1;
  rows.reference = {1.0f, 2.0f, 3.0f, 4.0f};
  rows.int8 = {1.01f, 1.98f, 3.0f, 4.02f};
  const EmbedQuality q = embed_quality(rows, 0.99);
  EXPECT_FALSE(q.centered);
  EXPECT_GT(q.centered_mean, 0.9999);
  EXPECT_EQ(q.centered_mean, q.raw_min);
  EXPECT_EQ(embed_quality_warning(q), "");
  EXPECT_NE(embed_quality_line(q).find("one text"), std::string::npos) << embed_quality_line(q);
  const auto j = to_json(q);
  EXPECT_EQ(j["metric"], "cosine");
  const auto back = embed_quality_from_json(j);
  ASSERT_TRUE(back.has_value());
  EXPECT_FALSE(back->centered);
  EXPECT_EQ(back->centered_mean, q.centered_mean);

  // Two texts are centered as before, and a lossy int8 still warns.
  rows.texts = 2;
  rows.reference.insert(rows.reference.end(), {4.0f, 3.0f, 2.0f, 1.0f});
  rows.int8 = {4.0f, 3.0f, 2.0f, 1.0f, 1.0f, 2.0f, 3.0f, 4.0f};  // swapped: centered cosine -1
  const EmbedQuality two = embed_quality(rows, 0.99);
  EXPECT_TRUE(two.centered);
  EXPECT_LT(two.centered_mean, 0.0);
  EXPECT_NE(embed_quality_warning(two).find("centered cosine"), std::string::npos);
  EXPECT_EQ(to_json(two)["metric"], "centered_cosine");
}

TEST(Int8SampleSize, EstimatesRecordsFromLines) {
  const auto dir = test::scratch_dir("int8-sample-estimate");
  {
    std::ofstream(dir / "a.jsonl") << "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": \"c\"}";  // no last newline
    std::ofstream(dir / "b.csv") << "text\nx\ny\n";
  }
  RecordReaderOptions in;
  in.path = (dir / "a.jsonl").string();
  EXPECT_EQ(estimate_input_records(in), 3u);
  in.paths = {(dir / "a.jsonl").string(), (dir / "b.csv").string()};
  in.format = std::nullopt;
  EXPECT_EQ(estimate_input_records(in), 5u);  // the CSV's header is not a record
  in.paths = {"-"};
  EXPECT_EQ(estimate_input_records(in), 0u);  // a stream: unknown
}

}  // namespace
}  // namespace stoke
