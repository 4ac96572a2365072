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
#include "support/goldens.h"

namespace stoke {
namespace {

using namespace test::goldens;

// last_hidden_state [n, width, H] at the positions where the mask is 1.
std::vector<double> golden_hidden_packed(const Fixture& fx) {
  const auto hs = golden(*fx.golden, "last_hidden_state");
  const auto mask = golden(*fx.golden, "attention_mask");
  const StoredTensor* t = fx.golden->find("last_hidden_state");
  const size_t rows = static_cast<size_t>(t->shape[0]), width = static_cast<size_t>(t->shape[1]),
               H = static_cast<size_t>(t->shape[2]);
  std::vector<double> out;
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < width; ++c)
      if (mask[r * width + c] != 0) out.insert(out.end(), hs.begin() + (r * width + c) * H, hs.begin() + (r * width + c + 1) * H);
  return out;
}

struct Case {
  const char* model;
  const char* kernels;  // "reference" or "fast"
  DType dtype;
};

class ModelGolden : public ::testing::TestWithParam<Case> {};

TEST_P(ModelGolden, MatchesHuggingFace) {
  const Case& k = GetParam();
  const Fixture fx = open_fixture(k.model);
  const HfConfig& c = fx.folder.config;
  cpu::CpuBackend backend(std::string(k.kernels) == "fast" ? cpu::fast_kernels() : cpu::reference_kernels());
  EncoderLoadOptions load;
  load.dtype = k.dtype;
  load.need_classifier = true;
  load.need_pooler = c.model_type == ModelType::bert;
  const LoadedEncoder enc = load_encoder(c, open_model_folder_weights(fx.folder), backend, load);
  const double tol = k.dtype == DType::f32 ? 1e-5 : 2e-2;

  const PackedBatch batch = pack_golden(fx, "");
  const size_t B = static_cast<size_t>(batch.sequences()), T = static_cast<size_t>(batch.tokens());
  const size_t H = static_cast<size_t>(c.hidden_size), C = static_cast<size_t>(c.num_labels());
  EncoderRunner runner(enc, backend, static_cast<int64_t>(T), static_cast<int64_t>(B));

  std::vector<float> hidden(T * H), head(B * H), logits(B * C);
  std::map<std::string, std::vector<float>> pooled;
  for (const auto& [name, mode, norm] : {std::tuple{"mean_pooled", PoolingMode::mean, false},
                                         std::tuple{"mean_pooled_normalized", PoolingMode::mean, true},
                                         std::tuple{"cls_pooled", PoolingMode::cls, false},
                                         std::tuple{"cls_pooled_normalized", PoolingMode::cls, true}}) {
    EncoderOutputs out;
    pooled[name].resize(B * H);
    out.pooled = pooled[name].data();
    out.pooling = mode;
    out.normalize = norm;
    if (std::string(name) == "mean_pooled") {
      out.hidden = hidden.data();
      out.head_hidden = head.data();
      out.logits = logits.data();
    }
    backend.wait(*runner.run(batch, out));
  }
  EXPECT_LE(relative_error(hidden, golden_hidden_packed(fx)), tol) << "last_hidden_state";
  for (const auto& [name, values] : pooled) EXPECT_LE(relative_error(values, best_golden(*fx.golden, name)), tol) << name;
  const std::string head_name = c.model_type == ModelType::bert ? "pooler_output" : "cls_head_hidden";
  EXPECT_LE(relative_error(head, best_golden(*fx.golden, head_name)), tol) << head_name;
  EXPECT_LE(relative_error(logits, best_golden(*fx.golden, "logits")), tol) << "logits";

  if (c.model_type == ModelType::bert) {  // sentence pairs: token type ids 1 on the second text
    const PackedBatch pairs = pack_golden(fx, "pair.");
    EncoderRunner pair_runner(enc, backend, pairs.tokens(), pairs.sequences());
    std::vector<float> pair_head(static_cast<size_t>(pairs.sequences()) * H),
        pair_logits(static_cast<size_t>(pairs.sequences()) * C);
    EncoderOutputs out;
    out.head_hidden = pair_head.data();
    out.logits = pair_logits.data();
    backend.wait(*pair_runner.run(pairs, out));
    EXPECT_LE(relative_error(pair_head, best_golden(*fx.golden, "pair.pooler_output")), tol) << "pair.pooler_output";
    EXPECT_LE(relative_error(pair_logits, best_golden(*fx.golden, "pair.logits")), tol) << "pair.logits";
  }
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
  for (const char* model : {"tiny-bert", "tiny-xlmr"}) {
    const Fixture fx = open_fixture(model);
    const HfConfig& c = fx.folder.config;
    cpu::CpuBackend backend(cpu::fast_kernels());
    const LoadedEncoder enc = load_encoder(c, open_model_folder_weights(fx.folder), backend, {});
    std::vector<size_t> lengths;
    const PackedBatch all = pack_golden(fx, "", &lengths);
    const size_t H = static_cast<size_t>(c.hidden_size);
    EncoderRunner runner(enc, backend, all.tokens(), all.sequences());
    std::vector<float> batched(static_cast<size_t>(all.sequences()) * H);
    EncoderOutputs out;
    out.pooled = batched.data();
    backend.wait(*runner.run(all, out));
    for (size_t b : {size_t{0}, size_t{7}, size_t{40}, size_t{49}, size_t{65}}) {
      PackedBatch one;
      one.clear();
      const auto begin = all.ids.begin() + all.cu_seqlens[b], end = all.ids.begin() + all.cu_seqlens[b + 1];
      const auto tbegin = all.type_ids.begin() + all.cu_seqlens[b];
      one.add(std::vector<int32_t>(begin, end), std::vector<int32_t>(tbegin, tbegin + (end - begin)), c);
      std::vector<float> alone(H);
      out.pooled = alone.data();
      backend.wait(*runner.run(one, out));
      double num = 0, den = 0;
      for (size_t i = 0; i < H; ++i) {
        num += (alone[i] - batched[b * H + i]) * (alone[i] - batched[b * H + i]);
        den += alone[i] * alone[i];
      }
      EXPECT_LE(std::sqrt(num / den), 1e-6) << model << " text " << b;
    }
  }
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
