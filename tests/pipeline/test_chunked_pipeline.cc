// Chunked runs of the encode pipeline (docs/pipeline.md "Long documents"):
// a chunk's row is the model's vector for exactly its span, late chunking's
// rows pool each span's token states from one pass over the document (as
// transformers computes them), --pool-chunks pools a record's chunk rows.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"
#include "jobs/model_session.h"
#include "pipeline/encode_pipeline.h"
#include "support/corpus_files.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct ChunkOut {
  uint64_t record;
  ChunkRow chunk;
  std::vector<float> values;
};

class ChunkSink : public RowSink {
 public:
  explicit ChunkSink(int64_t width) : width_(width) {}
  void row(const InputRecord& record, const Encoding&, const float* values) override {
    plain.push_back({record.index, {}, std::vector<float>(values, values + width_)});
  }
  void chunk_row(const InputRecord& record, const ChunkRow& chunk, const float* values) override {
    rows.push_back({record.index, chunk, std::vector<float>(values, values + width_)});
  }
  void skipped(const InputRecord&) override {}
  std::vector<ChunkOut> rows, plain;

 private:
  int64_t width_;
};

double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

std::vector<double> normalized(std::vector<double> v) {
  double n = 0;
  for (double x : v) n += x * x;
  n = std::sqrt(n);
  for (double& x : v) x /= n;
  return v;
}

fs::path write_texts(const std::string& name, const std::vector<std::string>& texts) {
  return test::texts_file("chunked-pipeline-" + name, texts);
}

using test::long_documents;

ModelSession open(const fs::path& model) {
  CommonOptions o;
  o.model = model.string();
  o.device = "cpu";
  return open_model_session(o, /*need_classifier=*/false);
}

fs::path golden_model(const std::string& name) {
  if (name == "tiny-bert") return test::fixture("models/tiny-bert");
  return fs::path(STOKE_SOURCE_DIR) / "tests" / "golden" / "models" / name;
}

EncodePipelineOptions options(const ModelSession& s, const fs::path& input) {
  EncodePipelineOptions po;
  po.input.path = input.string();
  po.encode.max_length = static_cast<size_t>(s.text.max_length);
  po.pooling = Pooling::mean;
  po.normalize = true;
  po.workers = 2;
  po.batch_tokens = 512;  // several batches
  return po;
}

std::vector<ChunkOut> run(const ModelSession& s, const EncodePipelineOptions& po, std::vector<ChunkOut>* plain = nullptr) {
  ChunkSink sink(pipeline_row_width(s.encoder, po));
  run_encode_pipeline(s.encoder, *s.backend, *s.text.tokenizer, po, sink);
  if (plain) *plain = sink.plain;
  return sink.rows;
}

// Late chunking against transformers (tests/golden/make_late_chunking.py):
// each chunk's row is the mean of its tokens' last hidden states from one
// pass over the whole document, normalized. ModernBERT's pooling is CLS,
// which a span pools as its mean (as Jina's late chunking does).
TEST(ChunkedPipeline, LateChunkingPoolsTheSpansOfOneForwardPass) {
  const json golden = json::parse(read_file(fs::path(STOKE_SOURCE_DIR) / "tests" / "golden" /
                                            "late_chunking.expected.json"));
  for (const auto& [name, docs] : golden.items()) {
    const ModelSession s = open(golden_model(name));
    std::vector<std::string> texts;
    for (const json& d : docs) {
      texts.push_back(d["text"].get<std::string>());
      EXPECT_EQ(s.text.tokenizer->encode(texts.back()).ids, d["ids"].get<std::vector<int32_t>>()) << name;
    }
    EncodePipelineOptions po = options(s, write_texts("late-" + name, texts));
    po.pooling = Pooling::cls;
    po.chunks.settings = {16, 4, ChunkBoundary::word};
    po.chunks.late = true;
    const auto rows = run(s, po);
    ASSERT_GT(rows.size(), 3 * texts.size()) << name;
    for (const ChunkOut& r : rows) {
      const json& hidden = docs[r.record]["hidden"];
      std::vector<double> mean(hidden[0].size(), 0.0);
      for (uint32_t t = r.chunk.span.token_begin; t < r.chunk.span.token_end; ++t)
        for (size_t c = 0; c < mean.size(); ++c) mean[c] += hidden[1 + t][c].get<double>();
      EXPECT_LE(rel_err(r.values, normalized(mean)), 1e-5) << name << " doc " << r.record << " chunk " << r.chunk.index;
    }
  }
}

// Plain chunking: each chunk is a text of its own — its row is what the
// model gives for the span's text alone (with the prompt before it).
TEST(ChunkedPipeline, ChunkRowsAreTheSpansEmbeddedAlone) {
  const ModelSession s = open(golden_model("tiny-bert"));
  const auto docs = long_documents(6, 12);
  EncodePipelineOptions po = options(s, write_texts("plain", docs));
  po.prompt = "query: ";
  po.chunks.settings = {24, 0, ChunkBoundary::word};
  const auto rows = run(s, po);
  std::vector<std::string> spans;
  for (const ChunkOut& r : rows)
    spans.push_back(docs[r.record].substr(r.chunk.span.byte_begin, r.chunk.span.byte_end - r.chunk.span.byte_begin));
  EncodePipelineOptions alone = options(s, write_texts("plain-alone", spans));
  alone.prompt = "query: ";
  std::vector<ChunkOut> plain;
  run(s, alone, &plain);
  ASSERT_EQ(plain.size(), rows.size());
  size_t compared = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    // A cut without whitespace (a CJK run) keeps the document's pieces, which
    // the span alone may tokenize otherwise; those rows are not compared.
    std::vector<int32_t> ids = s.text.tokenizer->tokenize(spans[i]);
    if (ids.size() != rows[i].chunk.span.token_end - rows[i].chunk.span.token_begin) continue;
    ++compared;
    std::vector<double> want(plain[i].values.begin(), plain[i].values.end());
    EXPECT_LE(rel_err(rows[i].values, want), 1e-5) << "chunk " << i << ": " << spans[i].substr(0, 60);
  }
  EXPECT_GT(compared * 10, rows.size() * 8);
  // Every record is chunked; each record's chunks come in order.
  for (size_t i = 1; i < rows.size(); ++i)
    if (rows[i].record == rows[i - 1].record) EXPECT_EQ(rows[i].chunk.index, rows[i - 1].chunk.index + 1);
}

// --pool-chunks: the record's chunk rows pooled (mean or max per column),
// then normalized as the model's rows are.
TEST(ChunkedPipeline, PoolChunksPoolsTheChunkRows) {
  const ModelSession s = open(golden_model("tiny-bert"));
  const fs::path input = write_texts("pool", long_documents(5, 10));
  EncodePipelineOptions po = options(s, input);
  po.chunks.settings = {20, 5, ChunkBoundary::sentence};
  const auto chunks = run(s, po);
  for (ChunkPooling mode : {ChunkPooling::mean, ChunkPooling::max}) {
    po.chunks.pool = mode;
    const auto pooled = run(s, po);
    ASSERT_EQ(pooled.size(), 5u);
    for (const ChunkOut& p : pooled) {
      EXPECT_TRUE(p.chunk.pooled);
      std::vector<double> want;
      size_t n = 0;
      for (const ChunkOut& c : chunks) {
        if (c.record != p.record) continue;
        if (want.empty()) want.assign(c.values.size(), mode == ChunkPooling::max ? -1e30 : 0.0);
        for (size_t k = 0; k < want.size(); ++k)
          want[k] = mode == ChunkPooling::max ? std::max<double>(want[k], c.values[k]) : want[k] + c.values[k];
        ++n;
      }
      EXPECT_EQ(p.chunk.count, n);
      EXPECT_LE(rel_err(p.values, normalized(want)), 1e-6) << chunk_pooling_name(mode) << " record " << p.record;
    }
  }
}

// A document longer than the max length runs in macro-windows: every chunk
// gets a row, in order, and sees context (its row differs from plain
// chunking's, which sees only the chunk).
TEST(ChunkedPipeline, LateChunkingRunsLongDocumentsInMacroWindows) {
  const ModelSession s = open(golden_model("tiny-bert"));  // max length 128
  const auto docs = long_documents(3, 40);
  EncodePipelineOptions po = options(s, write_texts("macro", docs));
  po.chunks.settings = {32, 8, ChunkBoundary::none};
  const auto plain = run(s, po);
  po.chunks.late = true;
  const auto late = run(s, po);
  ASSERT_EQ(late.size(), plain.size());
  for (size_t i = 0; i < late.size(); ++i) {
    EXPECT_EQ(late[i].chunk.span, plain[i].chunk.span);
    double norm = 0;
    for (float v : late[i].values) norm += static_cast<double>(v) * v;
    EXPECT_NEAR(norm, 1.0, 1e-5);
    std::vector<double> other(plain[i].values.begin(), plain[i].values.end());
    EXPECT_GT(rel_err(late[i].values, other), 1e-3) << "chunk " << i << " saw no context";
  }
  EXPECT_GT(late.back().chunk.span.token_end, 3u * 128u);
}

TEST(ChunkedPipeline, ChunksLongerThanTheMaxLengthAreRefused) {
  const ModelSession s = open(golden_model("tiny-bert"));
  EncodePipelineOptions po = options(s, write_texts("too-long", long_documents(1, 40)));
  po.chunks.settings = {127, 0, ChunkBoundary::none};  // + [CLS] [SEP] = 129 > 128
  try {
    run(s, po);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than the max length 128"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stoke
