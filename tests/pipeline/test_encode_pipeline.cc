// The encode pipeline on the CPU backend with the fixture model: rows come
// back in input order for any window, worker count and token budget, equal to
// each text embedded alone; one host sync per batch; a resumed run skips what
// was committed and forms the same batches; a bad record stops with its line.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <fstream>

#include "core/error.h"
#include "jobs/model_session.h"
#include "pipeline/encode_pipeline.h"
#include "support/capped_backend.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;

struct Row {
  uint64_t record;
  std::vector<float> values;
};

class MemorySink : public RowSink {
 public:
  explicit MemorySink(int64_t width) : width_(width) {}
  void row(const InputRecord& record, const Encoding&, const float* values) override {
    rows.push_back({record.index, std::vector<float>(values, values + width_)});
  }
  void skipped(const InputRecord& record) override { skipped_records.push_back(record.index); }
  std::vector<Row> rows;
  std::vector<uint64_t> skipped_records;

 private:
  int64_t width_;
};

fs::path fortunes(size_t n) {
  const fs::path path = test::scratch_dir("encode-pipeline-input") / "texts.jsonl";
  std::ifstream in(test::fixture("corpus/fortunes-multilingual.jsonl"));
  std::ofstream out(path);
  std::string line;
  for (size_t i = 0; i < n && std::getline(in, line); ++i) out << line << '\n';
  return path;
}

class EncodePipeline : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CommonOptions o;
    o.model = test::fixture("models/tiny-bert").string();
    o.device = "cpu";
    session_ = new ModelSession(open_model_session(o, /*need_classifier=*/false));
    input_ = new fs::path(fortunes(150));
  }
  static void TearDownTestSuite() {
    delete session_;
    delete input_;
  }

  EncodePipelineOptions options() const {
    EncodePipelineOptions po;
    po.input.path = input_->string();
    po.encode.max_length = static_cast<size_t>(session_->text.max_length);
    po.pooling = Pooling::mean;
    po.normalize = true;
    return po;
  }
  std::pair<std::vector<Row>, PipelineStats> run(const EncodePipelineOptions& po) const {
    MemorySink sink(pipeline_row_width(session_->encoder, po));
    const PipelineStats st = run_encode_pipeline(session_->encoder, *session_->backend, *session_->text.tokenizer, po, sink);
    return {std::move(sink.rows), st};
  }

  static ModelSession* session_;
  static fs::path* input_;
};
ModelSession* EncodePipeline::session_ = nullptr;
fs::path* EncodePipeline::input_ = nullptr;

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

TEST_F(EncodePipeline, OrderAndValuesHoldForAnyWindowWorkersAndBudget) {
  // Window 1: every text alone in its batch — the reference.
  EncodePipelineOptions alone = options();
  alone.sort_window = 1;
  const auto [reference, ref_stats] = run(alone);
  ASSERT_EQ(reference.size(), 150u);
  EXPECT_EQ(ref_stats.batches, 150u);
  for (uint64_t window : {7u, 1000u}) {
    for (int workers : {1, 3}) {
      for (int64_t budget : {int64_t{130}, int64_t{4096}}) {
        EncodePipelineOptions po = options();
        po.sort_window = window;
        po.workers = workers;
        po.batch_tokens = budget;
        const auto [rows, st] = run(po);
        ASSERT_EQ(rows.size(), reference.size());
        for (size_t i = 0; i < rows.size(); ++i) {
          ASSERT_EQ(rows[i].record, i) << "window " << window << " workers " << workers;
          ASSERT_LE(relative_error(rows[i].values, reference[i].values), 1e-6)
              << "record " << i << " window " << window << " budget " << budget;
        }
        EXPECT_EQ(st.host_syncs, st.batches) << "one sync per batch: the result read";
        EXPECT_EQ(st.texts, 150u);
        EXPECT_EQ(st.real_tokens, st.computed_tokens);
      }
    }
  }
}

TEST_F(EncodePipeline, SerialEqualsPipelinedBitwise) {
  EncodePipelineOptions po = options();
  po.sort_window = 50;
  po.batch_tokens = 512;
  const auto [piped, a] = run(po);
  po.serial = true;
  const auto [serial, b] = run(po);
  ASSERT_EQ(piped.size(), serial.size());
  for (size_t i = 0; i < piped.size(); ++i) EXPECT_EQ(piped[i].values, serial[i].values) << i;
  EXPECT_EQ(a.batches, b.batches);
}

// A deadline (stop_after_seconds, what doctor and tune run under) stops the
// reader and the executor, which may both see it pass at once: the run says
// it stopped early, and what it wrote is the input's first rows, in order.
// (Both threads set the flag; under TSan this is the case that checks it.)
TEST_F(EncodePipeline, DeadlineStopsEarlyWithAnInOrderPrefix) {
  const fs::path big = test::scratch_dir("encode-pipeline-deadline") / "texts.jsonl";
  {
    std::ifstream in(test::fixture("corpus/fortunes-multilingual.jsonl"));
    std::ofstream out(big);
    for (std::string line; std::getline(in, line);) out << line << '\n';
  }
  EncodePipelineOptions po = options();
  po.input.path = big.string();
  po.sort_window = 256;
  po.batch_tokens = 1024;
  po.workers = 2;
  po.stop_after_seconds = 0.2;
  const auto [rows, st] = run(po);
  EXPECT_TRUE(st.stopped_early);
  EXPECT_LT(rows.size(), 24400u) << "the whole corpus in 0.2 s: the deadline was not reached";
  for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(rows[i].record, i);
}

// The cancel flag (Ctrl-C in Python's embed_job): set from another thread
// (here the writer's, mid-run), it stops the run as a deadline does — an
// in-order prefix of whole windows, and the run says it was cancelled. Set
// before the start, nothing is read.
TEST_F(EncodePipeline, CancelStopsWithAnInOrderPrefix) {
  class CancellingSink : public MemorySink {
   public:
    CancellingSink(int64_t width, std::atomic<bool>& cancel) : MemorySink(width), cancel_(cancel) {}
    void row(const InputRecord& record, const Encoding& e, const float* values) override {
      MemorySink::row(record, e, values);
      if (rows.size() == 30) cancel_.store(true);
    }

   private:
    std::atomic<bool>& cancel_;
  };
  std::atomic<bool> cancel{false};
  EncodePipelineOptions po = options();
  po.sort_window = 10;
  po.cancel = &cancel;
  CancellingSink sink(pipeline_row_width(session_->encoder, po), cancel);
  const PipelineStats st = run_encode_pipeline(session_->encoder, *session_->backend, *session_->text.tokenizer, po, sink);
  EXPECT_TRUE(st.cancelled);
  EXPECT_TRUE(st.stopped_early);
  EXPECT_GE(sink.rows.size(), 30u);
  EXPECT_LT(sink.rows.size(), 150u);
  EXPECT_EQ(sink.rows.size() % 10, 0u) << "whole windows only";
  for (size_t i = 0; i < sink.rows.size(); ++i) ASSERT_EQ(sink.rows[i].record, i);
  const auto [none, before] = run(po);  // the flag is still set
  EXPECT_TRUE(before.cancelled);
  EXPECT_TRUE(none.empty());
  cancel.store(false);
  const auto [all, after] = run(po);
  EXPECT_FALSE(after.cancelled);
  EXPECT_EQ(all.size(), 150u);
}

// max_records (the int8 quality sample): only the input's first records are
// read, whatever the window.
TEST_F(EncodePipeline, MaxRecordsReadsOnlyTheFirst) {
  EncodePipelineOptions po = options();
  po.sort_window = 64;
  po.max_records = 40;
  const auto [rows, st] = run(po);
  ASSERT_EQ(rows.size(), 40u);
  for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(rows[i].record, i);
  EXPECT_EQ(st.records, 40u);
  EXPECT_FALSE(st.stopped_early);
  po.max_records = 1000;  // more than the input holds
  EXPECT_EQ(run(po).first.size(), 150u);
}

TEST_F(EncodePipeline, ResumeDropsCommittedRowsAndKeepsTheBatches) {
  EncodePipelineOptions po = options();
  po.sort_window = 64;
  po.batch_tokens = 512;
  const auto [full, a] = run(po);
  po.resume_record = 100;  // mid-window: window [64, 128) is redone whole
  const auto [rest, b] = run(po);
  ASSERT_EQ(rest.size(), 50u);
  for (size_t i = 0; i < rest.size(); ++i) {
    EXPECT_EQ(rest[i].record, 100 + i);
    EXPECT_EQ(rest[i].values, full[100 + i].values) << "same batches, same bits";
  }
  EXPECT_EQ(b.resumed, 100u);  // 64 skipped unread + 36 recomputed and dropped
  EXPECT_EQ(b.records, 150u);
}

TEST_F(EncodePipeline, TasksTakeEveryNthRecord) {
  EncodePipelineOptions po = options();
  po.task_index = 2;
  po.task_count = 7;
  const auto [rows, st] = run(po);
  for (const Row& r : rows) EXPECT_EQ(r.record % 7, 2u);
  EXPECT_EQ(rows.size(), 22u);  // records 2, 9, ..., 149
  EXPECT_EQ(st.other_tasks, 150u - 22u);
}

// Token rows are the request batcher's (RowProduct::tokens, len_i rows per
// text); this pipeline's rows are one fixed width per text, so asking it for
// token rows is refused by name before anything runs, never made as logits.
TEST_F(EncodePipeline, TokenRowsAreRefused) {
  EncodePipelineOptions po = options();
  po.product = RowProduct::tokens;
  try {
    MemorySink sink(pipeline_row_width(session_->encoder, po));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("not token rows"), std::string::npos) << e.what();
  }
  MemorySink sink(8);
  EXPECT_THROW(run_encode_pipeline(session_->encoder, *session_->backend, *session_->text.tokenizer, po, sink), Error);
}

TEST_F(EncodePipeline, BadRecordStopsWithItsLineOrIsSkipped) {
  const fs::path path = test::scratch_dir("encode-pipeline-bad") / "bad.jsonl";
  {
    std::ofstream out(path);
    for (int i = 0; i < 50; ++i) out << (i == 20 ? std::string("{\"text\": null}") : "{\"text\": \"t" + std::to_string(i) + "\"}") << "\n";
  }
  EncodePipelineOptions po = options();
  po.input.path = path.string();
  try {
    run(po);
    FAIL() << "a bad record must stop the run";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::format);
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:21"), std::string::npos) << e.what();
  }
  po.skip_bad_records = true;
  MemorySink sink(pipeline_row_width(session_->encoder, po));
  run_encode_pipeline(session_->encoder, *session_->backend, *session_->text.tokenizer, po, sink);
  EXPECT_EQ(sink.rows.size(), 49u);
  EXPECT_EQ(sink.skipped_records, std::vector<uint64_t>{20});
}

using test::CappedBackend;

// RELIABILITY 10: out of device memory halves the token budget until the
// workspace fits, and the rows are the ones a roomy device gives; when not
// even one longest sequence fits, a clear error.
TEST_F(EncodePipeline, OutOfMemoryHalvesTheTokenBudget) {
  EncodePipelineOptions po = options();
  po.batch_tokens = 4096;
  const auto [want, roomy] = run(po);
  EXPECT_EQ(roomy.memory_halvings, 0);
  EXPECT_EQ(roomy.batch_tokens, 4096);

  // The largest workspace buffers are per token: q/k/v (3H floats) or the
  // FFN activation (I floats). Room for 600 tokens' worth: 512 fits, 1024 not.
  const HfConfig& c = session_->encoder.config;
  const int64_t widest = std::max(3 * c.hidden_size, c.intermediate_size);
  ASSERT_LE(po.encode.max_length, 512u);
  CappedBackend capped(*session_->backend, static_cast<size_t>(600 * widest * 4));
  MemorySink sink(pipeline_row_width(session_->encoder, po));
  const PipelineStats st = run_encode_pipeline(session_->encoder, capped, *session_->text.tokenizer, po, sink);
  EXPECT_EQ(st.memory_halvings, 3);  // 4096 -> 2048 -> 1024 -> 512
  EXPECT_EQ(st.batch_tokens, 512);
  EXPECT_EQ(memory_halving_note(st, po.batch_tokens),
            "the device had no room for --batch-tokens 4096: ran with 512 (halved 3 times)");
  EXPECT_GT(st.batches, roomy.batches);
  ASSERT_EQ(sink.rows.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(sink.rows[i].record, want[i].record);
    double num = 0, den = 0;
    for (size_t j = 0; j < want[i].values.size(); ++j) {
      num += (sink.rows[i].values[j] - want[i].values[j]) * (sink.rows[i].values[j] - want[i].values[j]);
      den += want[i].values[j] * want[i].values[j];
    }
    EXPECT_LE(std::sqrt(num / den), 1e-6) << "record " << want[i].record;
  }

  CappedBackend tiny(*session_->backend, 1024);
  MemorySink none(pipeline_row_width(session_->encoder, po));
  try {
    run_encode_pipeline(session_->encoder, tiny, *session_->text.tokenizer, po, none);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::device);
    EXPECT_NE(std::string(e.what()).find("does not fit"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stoke
