// The encoder forward on the CUDA backend against the Hugging Face goldens of
// both fixture models (f32 <= 1e-5, bf16 and f16 <= 2e-2), eagerly and
// through graph replay; a text alone equal to the same text in a batch; and
// `stoke embed --device cuda` end to end equal to `--device cpu` (the binary
// from $STOKE_BIN, as gpu-check sets it). Training: the step through graphs
// per length bucket equal to the eager step (and both to the CPU's), and the
// optimizer step's graph equal to the eager optimizer step. Out of memory on
// the GPU halves the embed pipeline's token budget (rows unchanged).
// Skipped, with the reason, where there is no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/cpu_backend.h"
#include "jobs/model_session.h"
#include "pipeline/encode_pipeline.h"
#include "support/capped_backend.h"
#include "cuda/cuda_test_support.h"
#include "io/model_folder.h"
#include "model/encoder.h"
#include "model/encoder_training.h"
#include "model/trainable_encoder.h"
#include "support/fixtures.h"
#include "support/encoder_goldens.h"
#include "support/golden_adamw_steps.h"
#include "support/golden_training_run.h"

namespace stoke {
namespace {

using namespace test::goldens;

// The pipeline's rows by record number (the OOM test).
class RowsSink : public RowSink {
 public:
  explicit RowsSink(int64_t width) : width_(width) {}
  void row(const InputRecord& record, const Encoding&, const float* values) override {
    rows.emplace_back(record.index, std::vector<float>(values, values + width_));
  }
  void skipped(const InputRecord&) override {}
  std::vector<std::pair<uint64_t, std::vector<float>>> rows;

 private:
  int64_t width_;
};

struct Case {
  const char* model;
  DType dtype;
  bool graphs;
};

class CudaGolden : public ::testing::TestWithParam<Case> {};

TEST_P(CudaGolden, MatchesHuggingFace) {
  STOKE_REQUIRE_GPU(backend);
  const Case& k = GetParam();
  // Room for the graph bucket above the batch's tokens.
  expect_matches_goldens(*backend, k.model, k.dtype, k.dtype == DType::f32 ? 1e-5 : 2e-2,
                                 RunnerSetup{EncoderRunner::kGraphBucket, k.graphs});
}

INSTANTIATE_TEST_SUITE_P(All, CudaGolden,
                         ::testing::Values(Case{"tiny-bert", DType::f32, false}, Case{"tiny-bert", DType::f32, true},
                                           Case{"tiny-bert", DType::bf16, false}, Case{"tiny-bert", DType::bf16, true},
                                           Case{"tiny-bert", DType::f16, true}, Case{"tiny-xlmr", DType::f32, false},
                                           Case{"tiny-xlmr", DType::f32, true}, Case{"tiny-xlmr", DType::bf16, true},
                                           Case{"tiny-xlmr", DType::f16, false},
                                           // the added architectures (tests/golden)
                                           Case{"tiny-electra", DType::f32, false}, Case{"tiny-electra", DType::bf16, true},
                                           Case{"tiny-distilbert", DType::f32, true}, Case{"tiny-distilbert", DType::bf16, false},
                                           Case{"tiny-roberta", DType::f32, true}, Case{"tiny-camembert", DType::f32, false},
                                           Case{"tiny-xlmr5", DType::bf16, true},
                                           Case{"tiny-mpnet", DType::f32, false}, Case{"tiny-mpnet", DType::bf16, true},
                                           Case{"tiny-modernbert", DType::f32, false},
                                           Case{"tiny-modernbert", DType::bf16, true},
                                           // the decoders: RMSNorm, rotary, grouped-query attention, SwiGLU
                                           Case{"tiny-qwen3", DType::f32, false}, Case{"tiny-qwen3", DType::bf16, true},
                                           Case{"tiny-qwen2", DType::f32, true}, Case{"tiny-qwen2", DType::bf16, false},
                                           // rotary + GLU encoders
                                           Case{"tiny-gte", DType::f32, false}, Case{"tiny-gte", DType::bf16, true},
                                           Case{"tiny-nomic", DType::f32, true}, Case{"tiny-nomic", DType::bf16, false}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.model) + "_" +
                                           std::string(dtype_name(info.param.dtype)) +
                                           (info.param.graphs ? "_graphs" : "_eager");
                           for (auto& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// A text alone equals the same text inside a mixed-length batch (f32, 1e-5),
// through graphs and eagerly.
TEST(CudaBatching, TextAloneEqualsTextInABatch) {
  STOKE_REQUIRE_GPU(backend);
  // cuBLASLt may sum in another order for another row count: a few ulps,
  // where a leak between rows would be O(1).
  for (const char* model : {"tiny-bert", "tiny-xlmr"})
    for (bool graphs : {false, true})
      expect_text_alone_equals_batch(*backend, model, 1e-5, RunnerSetup{EncoderRunner::kGraphBucket, graphs});
}

// The whole job: `stoke embed` on 300 fortunes, --device cuda against
// --device cpu, f32: the same rows in the same order.
std::vector<float> read_f32_npy(const std::filesystem::path& path, int64_t* rows, int64_t* cols) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_GT(bytes.size(), 10u);
  const size_t hlen = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
  const std::string header = bytes.substr(10, hlen);
  EXPECT_NE(header.find("'<f4'"), std::string::npos) << header;
  std::sscanf(header.c_str() + header.find("'shape': (") + 10, "%lld, %lld", reinterpret_cast<long long*>(rows),
              reinterpret_cast<long long*>(cols));
  std::vector<float> v(static_cast<size_t>(*rows * *cols));
  std::memcpy(v.data(), bytes.data() + 10 + hlen, v.size() * 4);
  return v;
}

TEST(CudaCli, EmbedOnTheGpuEqualsTheCpu) {
  STOKE_REQUIRE_GPU(backend);
  backend.reset();
  if (!std::filesystem::exists(test::stoke_binary())) GTEST_SKIP() << "no stoke binary (set STOKE_BIN)";
  const auto dir = test::scratch_dir("cuda-cli-embed");
  {
    std::ifstream in(test::fixture("corpus/fortunes-multilingual.jsonl"));
    std::ofstream out(dir / "texts.jsonl");
    std::string line;
    for (int i = 0; i < 300 && std::getline(in, line); ++i) out << line << '\n';
  }
  const std::string model = test::fixture("models/tiny-bert").string();
  std::vector<float> vecs[2];
  int64_t rows[2] = {0, 0}, cols[2] = {0, 0};
  const char* devices[2] = {"cpu", "cuda"};
  for (int i = 0; i < 2; ++i) {
    const auto out = dir / devices[i];
    const auto r = test::run_stoke("embed --model " + model + " --input " + (dir / "texts.jsonl").string() +
                                   " --output " + out.string() + " --device " + devices[i] + " --quiet");
    ASSERT_EQ(r.status, 0) << r.err;
    vecs[i] = read_f32_npy(out / "embeddings-00000.npy", &rows[i], &cols[i]);
  }
  ASSERT_EQ(rows[0], 300);
  ASSERT_EQ(rows[1], rows[0]);
  ASSERT_EQ(cols[1], cols[0]);
  for (int64_t r = 0; r < rows[0]; ++r) {
    double num = 0, den = 0;
    for (int64_t c = 0; c < cols[0]; ++c) {
      const double a = vecs[0][static_cast<size_t>(r * cols[0] + c)], b = vecs[1][static_cast<size_t>(r * cols[0] + c)];
      num += (a - b) * (a - b);
      den += a * a;
    }
    EXPECT_LE(std::sqrt(num / den), 1e-5) << "row " << r;
  }
}

// RELIABILITY 10 on the GPU: the embed pipeline on the CUDA backend, with
// allocations above a cap refused as a full GPU refuses them (CappedBackend:
// OutOfMemoryError, as check_cuda turns cudaErrorMemoryAllocation into),
// halves its token budget until the workspace fits, and its rows equal a
// roomy run's (f32: batch shapes differ, so 1e-6 per row, not bits).
TEST(CudaMemory, OutOfMemoryHalvesTheTokenBudgetOnTheGpu) {
  STOKE_REQUIRE_GPU(probe);
  probe.reset();
  CommonOptions o;
  o.model = test::fixture("models/tiny-bert").string();
  o.device = "cuda";
  ModelSession s = open_model_session(o, /*need_classifier=*/false);
  const auto input = test::scratch_dir("cuda-oom-halving") / "texts.jsonl";
  {
    std::ifstream in(test::fixture("corpus/fortunes-multilingual.jsonl"));
    std::ofstream out(input);
    std::string line;
    for (int i = 0; i < 150 && std::getline(in, line); ++i) out << line << '\n';
  }
  EncodePipelineOptions po;
  po.input.path = input.string();
  po.encode.max_length = static_cast<size_t>(s.text.max_length);
  po.pooling = Pooling::mean;
  po.normalize = true;
  po.batch_tokens = 4096;
  auto embed = [&](Backend& backend, PipelineStats* stats) {
    RowsSink sink(pipeline_row_width(s.encoder, po));
    *stats = run_encode_pipeline(s.encoder, backend, *s.text.tokenizer, po, sink);
    return sink.rows;
  };
  PipelineStats roomy, capped_stats;
  const auto want = embed(*s.backend, &roomy);
  EXPECT_EQ(roomy.memory_halvings, 0);
  const HfConfig& c = s.encoder.config;
  const int64_t widest = std::max(3 * c.hidden_size, c.intermediate_size);
  test::CappedBackend capped(*s.backend, static_cast<size_t>(600 * widest * 4));  // 512 tokens fit, 1024 not
  const auto got = embed(capped, &capped_stats);
  EXPECT_EQ(capped_stats.memory_halvings, 3);  // 4096 -> 2048 -> 1024 -> 512
  EXPECT_EQ(capped_stats.batch_tokens, 512);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].first, want[i].first);
    double num = 0, den = 0;
    for (size_t j = 0; j < want[i].second.size(); ++j) {
      num += (got[i].second[j] - want[i].second[j]) * (got[i].second[j] - want[i].second[j]);
      den += want[i].second[j] * want[i].second[j];
    }
    EXPECT_LE(std::sqrt(num / den), 1e-6) << "record " << want[i].first;
  }
}

// ---- training: graphs per length bucket ------------------------------------------
//
// Three micro-batches (the golden batches "train.", "train2.", then "train."
// again: its bucket's graphs replay), every dropout site the architecture
// trains with at p = 0.1 (test::goldens::golden_dropout), the
// gradients and the loss sums accumulated over the three: through graphs
// (the encoder forward and backward captured per bucket, the head eager
// between them, the layers' dropout step from device memory) against the
// same runner with graphs off (eager, unpadded), and the eager CUDA step
// against the CPU's fast kernels. Padding changes the GEMMs' row count, so
// cuBLASLt may pick another algorithm: a tolerance, not bits (f32 1e-5,
// bf16 2e-2 per tensor, relative; the key biases' gradient is zero up to
// rounding and compared absolutely).
using TrainRun = test::goldens::GoldenTrainingRun;

TrainRun train_three_micro_batches(Backend& backend, const std::string& model, DType dtype, bool graphs) {
  return test::goldens::train_golden_micro_batches(backend, open_fixture(model), dtype, {"train.", "train2.", "train."}, 77, 3,
                                          1.0f / 24.0f, [&](EncoderTrainingRunner& r) { r.set_graphs(graphs); });
}

void expect_same_training(const TrainRun& got, const TrainRun& want, double tol, const std::string& what) {
  EXPECT_EQ(got.metrics[2], want.metrics[2]) << what << ": examples counted";
  EXPECT_NEAR(got.metrics[0], want.metrics[0], tol * std::abs(want.metrics[0]) + 1e-9) << what << ": loss sum";
  for (const ParamSlot& s : got.slots) {
    const std::vector<float> g(got.grad.begin() + s.offset, got.grad.begin() + s.offset + s.numel);
    const std::vector<double> w(want.grad.begin() + s.offset, want.grad.begin() + s.offset + s.numel);
    if (s.role == TensorRole::key_bias) {
      for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-5) << what << " " << s.name;
      continue;
    }
    EXPECT_LE(relative_error(g, w), tol) << what << " " << s.name;
  }
}

// The f32 training goldens on the GPU, as tests/train checks the CPU: the
// loss and every gradient of the first batch (relative 1e-4), the parameters
// after two torch.optim.AdamW steps (1e-5).
TEST(CudaTraining, GoldenLossGradientsAndTwoAdamWSteps) {
  STOKE_REQUIRE_GPU(backend);
  for (const char* model : {"tiny-bert", "tiny-xlmr", "tiny-electra", "tiny-distilbert", "tiny-roberta",
                            "tiny-camembert", "tiny-xlmr5", "tiny-mpnet", "tiny-modernbert", "tiny-gte", "tiny-nomic"}) {
    SCOPED_TRACE(model);
    test::goldens::expect_golden_loss_gradients_and_two_adamw_steps(*backend, open_fixture(model));
  }
}

TEST(CudaTraining, GraphStepEqualsTheEagerStep) {
  STOKE_REQUIRE_GPU(backend);
  // ModernBERT (pre-norm, dropout in its classifier only) and MPNet
  // (relative attention) replay their graphs too.
  for (const char* model : {"tiny-bert", "tiny-roberta", "tiny-gte", "tiny-modernbert", "tiny-mpnet"})
    for (DType dtype : {DType::f32, DType::bf16}) {
      const std::string what = std::string(model) + " " + std::string(dtype_name(dtype));
      SCOPED_TRACE(what);
      const TrainRun eager = train_three_micro_batches(*backend, model, dtype, false);
      const TrainRun graphs = train_three_micro_batches(*backend, model, dtype, true);
      EXPECT_FALSE(graphs.stats.capture_failed);
      EXPECT_GE(graphs.stats.buckets, 1);
      EXPECT_EQ(graphs.stats.replayed, 3) << "every micro-batch through its bucket's graphs";
      EXPECT_EQ(eager.stats.replayed, 0);
      expect_same_training(graphs, eager, dtype == DType::f32 ? 1e-5 : 2e-2, what + " graphs vs eager");
      if (dtype == DType::f32) {
        cpu::CpuBackend cpu_backend(cpu::fast_kernels());
        const TrainRun cpu = train_three_micro_batches(cpu_backend, model, dtype, false);
        expect_same_training(eager, cpu, 1e-4, what + " cuda vs cpu");
      }
    }
}

// The optimizer step through its graph (captured on the first step; t and
// lr from device memory, staged by a copy before each replay) against the
// eager step, over six steps of a warmup and a decay
// (test::goldens::train_golden_optimizer_steps): bit for bit, as the AdamW
// kernel forms its coefficients on the device either way — f32, bf16, and
// f16 with the loss scaler and a skipped step.
TEST(CudaTraining, OptimizerGraphEqualsTheEagerSteps) {
  STOKE_REQUIRE_GPU(backend);
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Fixture fx = open_fixture("tiny-bert");
    const auto run = [&](bool graphs) {
      return train_golden_optimizer_steps(*backend, fx, dtype, [&](train::Optimizer& o) { o.set_graphs(graphs); });
    };
    const GoldenOptimizerRun eager = run(false), graphs = run(true);
    EXPECT_FALSE(graphs.stats.capture_failed);
    EXPECT_TRUE(graphs.stats.captured);
    EXPECT_EQ(graphs.stats.replayed, 6);
    EXPECT_EQ(eager.stats.eager, 6);
    test::goldens::expect_same_optimizer_state(graphs, eager);
  }
}

}  // namespace
}  // namespace stoke
