// The request batcher on the CPU backend with the fixture model: one
// caller's texts come back bit-identical to the embed pipeline's rows (the
// same batches); texts from many concurrent callers equal their offline rows
// to f32 rounding whichever requests shared their batches; one host sync per
// batch; token vectors, logits, prompts, token-id input; refusals name the
// input; cancel and stop leave the batcher serving.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <random>
#include <thread>

#include "core/error.h"
#include "jobs/model_session.h"
#include "pipeline/encode_pipeline.h"
#include "pipeline/request_batcher.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using State = BatchRequest::State;

std::vector<std::string> fortune_texts(size_t n) {
  std::ifstream in(test::fixture("corpus/fortunes-multilingual.jsonl"));
  std::vector<std::string> texts;
  std::string line;
  while (texts.size() < n && std::getline(in, line)) {
    // {"text": "...", ...}: the JSON string, unescaped by the record reader below.
    texts.push_back(line);
  }
  return texts;
}

BatchRequestOptions producing(RowProduct product) {
  BatchRequestOptions o;
  o.product = product;
  return o;
}

class RowsSink : public RowSink {
 public:
  explicit RowsSink(int64_t width) : width_(width) {}
  void row(const InputRecord& record, const Encoding&, const float* values) override {
    texts.push_back(record.text);
    rows.emplace_back(values, values + width_);
  }
  void skipped(const InputRecord&) override {}
  std::vector<std::string> texts;
  std::vector<std::vector<float>> rows;

 private:
  int64_t width_;
};

double relative_l2(const float* a, const float* b, int64_t n) {
  double d = 0, s = 0;
  for (int64_t i = 0; i < n; ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    s += double(b[i]) * b[i];
  }
  return std::sqrt(d / std::max(s, 1e-30));
}

class RequestBatcherTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CommonOptions o;
    o.model = test::fixture("models/tiny-bert").string();
    o.device = "cpu";
    session_ = new ModelSession(open_model_session(o, /*need_classifier=*/false));
    // The offline rows: the embed pipeline over the first 300 fortunes, one window.
    const fs::path path = test::scratch_dir("request-batcher") / "texts.jsonl";
    {
      std::ofstream out(path);
      for (const auto& line : fortune_texts(300)) out << line << '\n';
    }
    EncodePipelineOptions po;
    po.input.path = path.string();
    po.encode.max_length = static_cast<size_t>(session_->text.max_length);
    po.pooling = Pooling::mean;
    po.normalize = true;
    po.batch_tokens = 2048;
    po.max_batch_size = 64;
    offline_ = new RowsSink(pipeline_row_width(session_->encoder, po));
    run_encode_pipeline(session_->encoder, *session_->backend, *session_->text.tokenizer, po, *offline_);
  }
  static void TearDownTestSuite() {
    delete session_;
    delete offline_;
  }

  static RequestBatcherOptions options() {
    RequestBatcherOptions bo;
    bo.encode.max_length = static_cast<size_t>(session_->text.max_length);
    bo.pooling = Pooling::mean;
    bo.normalize = true;
    bo.batch_tokens = 2048;
    bo.max_batch_size = 64;
    bo.workers = 2;
    return bo;
  }
  static RequestBatcher make(const RequestBatcherOptions& bo) {
    return RequestBatcher(session_->encoder, *session_->backend, *session_->text.tokenizer, bo);
  }
  static std::vector<BatchItem> items(size_t begin, size_t end) {
    std::vector<BatchItem> v;
    for (size_t i = begin; i < end; ++i) v.push_back({offline_->texts[i], std::nullopt, std::nullopt});
    return v;
  }
  static std::string error_of(const BatchRequest& r) {
    try {
      std::rethrow_exception(r.error());
    } catch (const std::exception& e) {
      return e.what();
    }
  }

  static ModelSession* session_;
  static RowsSink* offline_;
};
ModelSession* RequestBatcherTest::session_ = nullptr;
RowsSink* RequestBatcherTest::offline_ = nullptr;

TEST_F(RequestBatcherTest, OneCallersTextsEqualTheEmbedPipelineBitForBit) {
  RequestBatcher batcher(session_->encoder, *session_->backend, *session_->text.tokenizer, options());
  auto r = batcher.submit(items(0, 300), {});
  ASSERT_EQ(r->wait(), State::done);
  const int64_t width = batcher.pooled_width();
  ASSERT_EQ(r->width, width);
  ASSERT_EQ(r->values.size(), 300u * static_cast<size_t>(width));
  for (size_t i = 0; i < 300; ++i)
    ASSERT_EQ(0, std::memcmp(r->values.data() + i * width, offline_->rows[i].data(), width * sizeof(float)))
        << "text " << i;
  const auto st = batcher.stats();
  EXPECT_EQ(st.texts, 300u);
  EXPECT_GT(st.batches, 1u);                  // the budget cut the texts into several batches
  EXPECT_EQ(st.host_syncs, st.batches);       // one host sync per batch
  EXPECT_EQ(st.queued_texts, 0u);
  EXPECT_EQ(r->token_counts.size(), 300u);
  EXPECT_GT(r->total_tokens, 300u);
}

TEST_F(RequestBatcherTest, ConcurrentCallersGetTheirOwnRowsWhateverSharedTheirBatches) {
  RequestBatcher batcher(session_->encoder, *session_->backend, *session_->text.tokenizer, options());
  const int64_t width = batcher.pooled_width();
  std::atomic<int> wrong{0}, finished{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 8; ++t) {
    callers.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int k = 0; k < 12; ++k) {
        const size_t begin = rng() % 290, n = 1 + rng() % 10;
        const size_t end = std::min<size_t>(300, begin + n);
        auto r = batcher.submit(items(begin, end), {});
        if (r->wait() != State::done) {
          wrong++;
          continue;
        }
        for (size_t i = begin; i < end; ++i)
          if (relative_l2(r->values.data() + (i - begin) * width, offline_->rows[i].data(), width) > 1e-6) wrong++;
        finished++;
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(finished.load(), 8 * 12);
  const auto st = batcher.stats();
  EXPECT_EQ(st.requests, 96u);
  EXPECT_EQ(st.host_syncs, st.batches);
}

TEST_F(RequestBatcherTest, TokenVectorsAreTheHiddenStatesThePooledMeanAverages) {
  auto bo = options();
  bo.normalize = false;
  RequestBatcher batcher(session_->encoder, *session_->backend, *session_->text.tokenizer, bo);
  auto tokens = batcher.submit(items(10, 15), producing(RowProduct::tokens));
  auto pooled = batcher.submit(items(10, 15), producing(RowProduct::pooled));
  ASSERT_EQ(tokens->wait(), State::done);
  ASSERT_EQ(pooled->wait(), State::done);
  const int64_t H = batcher.hidden_size();
  ASSERT_EQ(tokens->width, H);
  ASSERT_EQ(tokens->row_offsets.size(), 6u);
  for (size_t i = 0; i < 5; ++i) {
    const int64_t b = tokens->row_offsets[i], e = tokens->row_offsets[i + 1];
    ASSERT_EQ(e - b, tokens->token_counts[i]);
    std::vector<float> mean(static_cast<size_t>(H), 0.f);
    for (int64_t row = b; row < e; ++row)
      for (int64_t h = 0; h < H; ++h) mean[h] += tokens->values[row * H + h] / static_cast<float>(e - b);
    EXPECT_LT(relative_l2(mean.data(), pooled->values.data() + i * H, H), 1e-5) << "text " << i;
  }
}

TEST_F(RequestBatcherTest, LogitsOfAClassifierAndPromptsAndTokenIds) {
  RequestBatcher batcher(session_->encoder, *session_->backend, *session_->text.tokenizer, options());
  ASSERT_EQ(batcher.num_labels(), 3);
  auto logits = batcher.submit(items(0, 4), producing(RowProduct::logits));
  ASSERT_EQ(logits->wait(), State::done);
  EXPECT_EQ(logits->width, 3);
  EXPECT_EQ(logits->values.size(), 12u);

  // A prompt is put before the text: the same as submitting prompt + text.
  BatchRequestOptions with_prompt;
  with_prompt.prompt = "query: ";
  auto a = batcher.submit({{"the cat sat", std::nullopt, std::nullopt}}, with_prompt);
  auto b = batcher.submit({{"query: the cat sat", std::nullopt, std::nullopt}}, {});
  ASSERT_EQ(a->wait(), State::done);
  ASSERT_EQ(b->wait(), State::done);
  EXPECT_EQ(a->values, b->values);

  // Token ids of this model's tokenizer, used as they are, give the text's row.
  const Encoding e = session_->text.tokenizer->encode("the cat sat");
  auto ids = batcher.submit({{"", std::nullopt, e.ids}}, {});
  auto text = batcher.submit({{"the cat sat", std::nullopt, std::nullopt}}, {});
  ASSERT_EQ(ids->wait(), State::done);
  ASSERT_EQ(text->wait(), State::done);
  EXPECT_LT(relative_l2(ids->values.data(), text->values.data(), batcher.pooled_width()), 1e-6);
}

TEST_F(RequestBatcherTest, BadInputFailsItsRequestNamingTheInputAndTheBatcherGoesOn) {
  RequestBatcher batcher(session_->encoder, *session_->backend, *session_->text.tokenizer, options());
  auto bad_id = batcher.submit({{"ok", std::nullopt, std::nullopt}, {"", std::nullopt, std::vector<int32_t>{2, 99999}}}, {});
  ASSERT_EQ(bad_id->wait(), State::failed);
  EXPECT_NE(error_of(*bad_id).find("input 1: token id 99999 is outside the model's vocabulary"), std::string::npos)
      << error_of(*bad_id);

  auto no_ids = batcher.submit({{"", std::nullopt, std::vector<int32_t>{}}}, {});
  ASSERT_EQ(no_ids->wait(), State::failed);
  EXPECT_NE(error_of(*no_ids).find("input 0: expected at least one token id"), std::string::npos);

  std::string long_text;
  for (int i = 0; i < 400; ++i) long_text += "word ";
  BatchRequestOptions no_truncation;
  no_truncation.truncate = false;
  auto too_long = batcher.submit({{"short", std::nullopt, std::nullopt}, {long_text, std::nullopt, std::nullopt}},
                                 no_truncation);
  ASSERT_EQ(too_long->wait(), State::failed);
  EXPECT_NE(error_of(*too_long).find("input 1 has"), std::string::npos) << error_of(*too_long);
  EXPECT_NE(error_of(*too_long).find("more than the maximum length 128"), std::string::npos) << error_of(*too_long);

  // Truncated by default, and said so.
  auto cut = batcher.submit({{long_text, std::nullopt, std::nullopt}}, {});
  ASSERT_EQ(cut->wait(), State::done);
  EXPECT_EQ(cut->truncated[0], 1);
  EXPECT_EQ(cut->token_counts[0], 128);

  auto empty = batcher.submit({}, {});
  EXPECT_EQ(empty->state(), State::done);
  EXPECT_TRUE(empty->values.empty());

  auto good = batcher.submit(items(0, 3), {});
  ASSERT_EQ(good->wait(), State::done);
  EXPECT_EQ(0, std::memcmp(good->values.data(), offline_->rows[0].data(), batcher.pooled_width() * sizeof(float)));
}

TEST_F(RequestBatcherTest, LogitsFromAModelWithoutAHeadAreRefused) {
  CommonOptions o;
  o.model = test::fixture("models/tiny-bert").string();
  o.device = "cpu";
  ModelSession headless = open_model_session(o, /*need_classifier=*/false);
  headless.encoder.params.head_out_w = {};  // an encoder checkpoint without a classifier
  RequestBatcher batcher(headless.encoder, *headless.backend, *headless.text.tokenizer, options());
  EXPECT_EQ(batcher.num_labels(), 0);
  auto r = batcher.submit({{"a", std::nullopt, std::nullopt}}, producing(RowProduct::logits));
  ASSERT_EQ(r->wait(), State::failed);
  EXPECT_EQ(error_of(*r), "this model has no classification head");
}

TEST_F(RequestBatcherTest, CancelDropsQueuedTextsAndTheNextRequestIsServed) {
  RequestBatcher batcher(session_->encoder, *session_->backend, *session_->text.tokenizer, options());
  std::vector<std::shared_ptr<BatchRequest>> cancelled;
  for (int k = 0; k < 10; ++k) cancelled.push_back(batcher.submit(items(0, 300), {}));
  for (auto& r : cancelled) r->cancel();
  for (auto& r : cancelled) {
    const State s = r->wait();
    EXPECT_TRUE(s == State::cancelled || s == State::done);
  }
  auto after = batcher.submit(items(5, 9), {});
  ASSERT_EQ(after->wait(), State::done);
  EXPECT_LT(relative_l2(after->values.data(), offline_->rows[5].data(), batcher.pooled_width()), 1e-6);
  EXPECT_GT(batcher.stats().cancelled_texts, 0u);  // most of 3,000 texts never reached the device
}

TEST_F(RequestBatcherTest, CallbackRunsOnceAndStopRefusesNewRequests) {
  std::atomic<int> calls{0};
  RequestBatcher batcher(session_->encoder, *session_->backend, *session_->text.tokenizer, options());
  auto r = batcher.submit(items(0, 50), {}, [&](BatchRequest& done) {
    EXPECT_EQ(done.state(), State::done);
    calls++;
  });
  batcher.stop();  // drains: r finishes first
  EXPECT_EQ(r->state(), State::done);
  EXPECT_EQ(calls.load(), 1);
  auto late = batcher.submit(items(0, 1), {}, [&](BatchRequest&) { calls++; });
  EXPECT_EQ(late->state(), State::failed);
  EXPECT_EQ(error_of(*late), "the server is stopping: no new requests are taken");
  EXPECT_EQ(calls.load(), 2);
}

TEST_F(RequestBatcherTest, AnIdleDeviceWaitsUpToMaxWaitToFillABatch) {
  auto bo = options();
  bo.max_wait_seconds = 1;  // far longer than submitting eight requests takes
  bo.batch_tokens = 100000;
  RequestBatcher batcher(session_->encoder, *session_->backend, *session_->text.tokenizer, bo);
  std::vector<std::shared_ptr<BatchRequest>> rs;
  for (size_t i = 0; i < 8; ++i) rs.push_back(batcher.submit(items(i, i + 1), {}));
  for (auto& r : rs) ASSERT_EQ(r->wait(), State::done);
  EXPECT_LT(batcher.stats().batches, 8u);  // shared, not one batch per request
}

TEST_F(RequestBatcherTest, BadOptionsAreRefusedWithTheFlag) {
  auto bo = options();
  bo.batch_tokens = 0;
  try {
    make(bo);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--batch-tokens: expected a positive number");
  }
}

}  // namespace
}  // namespace stoke
