// The encoder forward against the Hugging Face goldens of both fixture models
// (../shared/fixtures/golden): last hidden state where the mask is 1, pooler /
// classification-head hidden, logits, cls and mean pooling (normalized and
// not), BERT sentence pairs — with the reference kernels and the fast ones, in
// f32 (relative error <= 1e-5) and bf16 (<= 2e-2). And batch invariance: a text
// alone equals the same text inside a mixed-length batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <tuple>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "cpu/cpu_backend.h"
#include "io/model_folder.h"
#include "io/safetensors.h"
#include "model/encoder.h"
#include "support/fixtures.h"
#include "support/encoder_goldens.h"

namespace stoke {
namespace {

using namespace test::goldens;

struct Case {
  const char* model;
  const char* kernels;  // "reference" or "fast"
  DType dtype;
};

class ModelGolden : public ::testing::TestWithParam<Case> {};

TEST_P(ModelGolden, MatchesHuggingFace) {
  const Case& k = GetParam();
  cpu::CpuBackend backend(std::string(k.kernels) == "fast" ? cpu::fast_kernels() : cpu::reference_kernels());
  expect_encoder_matches_goldens(backend, k.model, k.dtype, k.dtype == DType::f32 ? 1e-5 : 2e-2);
}

INSTANTIATE_TEST_SUITE_P(All, ModelGolden,
                         ::testing::Values(Case{"tiny-bert", "reference", DType::f32},
                                           Case{"tiny-bert", "fast", DType::f32},
                                           Case{"tiny-bert", "fast", DType::bf16},
                                           Case{"tiny-xlmr", "reference", DType::f32},
                                           Case{"tiny-xlmr", "fast", DType::f32},
                                           Case{"tiny-xlmr", "fast", DType::bf16}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.model) + "_" + info.param.kernels + "_" +
                                           std::string(dtype_name(info.param.dtype));
                           for (auto& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// A text embedded alone gives the same vector as inside a mixed-length batch.
TEST(ModelBatching, TextAloneEqualsTextInABatch) {
  cpu::CpuBackend backend(cpu::fast_kernels());
  for (const char* model : {"tiny-bert", "tiny-xlmr"}) expect_text_alone_equals_batch(backend, model, 1e-6);
}

// Token ids, positions and type ids are checked on the host before any kernel.
TEST(ModelBatching, OutOfRangeInputsAreRefusedBeforeRunning) {
  const Fixture fx = open_fixture("tiny-bert");
  cpu::CpuBackend backend(cpu::reference_kernels());
  const LoadedEncoder enc = load_encoder(fx.folder.config, open_model_folder_weights(fx.folder), backend, {});
  const uint64_t syncs_after_load = backend.host_syncs();
  EncoderRunner runner(enc, backend, 256, 4);
  EncoderOutputs out;
  std::vector<float> pooled(64);
  out.pooled = pooled.data();
  PackedBatch bad;
  bad.clear();
  bad.add(std::vector<int32_t>{2, 3000, 3}, {}, fx.folder.config);
  EXPECT_THROW(runner.run(bad, out), Error);
  bad.clear();
  bad.add(std::vector<int32_t>(129, 5), {}, fx.folder.config);  // position 128 is past the table
  EXPECT_THROW(runner.run(bad, out), Error);
  bad.clear();
  bad.add(std::vector<int32_t>{2, 5, 3}, std::vector<int32_t>{0, 2, 0}, fx.folder.config);
  EXPECT_THROW(runner.run(bad, out), Error);
  EXPECT_EQ(backend.host_syncs(), syncs_after_load);  // refused before anything was enqueued
}

}  // namespace
}  // namespace stoke
