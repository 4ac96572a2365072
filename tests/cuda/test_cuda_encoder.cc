// The encoder forward on the CUDA backend against the Hugging Face goldens of
// both fixture models (f32 <= 1e-5, bf16 and f16 <= 2e-2), eagerly and
// through graph replay; a text alone equal to the same text in a batch; and
// `stoke embed --device cuda` end to end equal to `--device cpu` (the binary
// from $STOKE_BIN, as gpu-check sets it).
// Skipped, with the reason, where there is no GPU.
#include <gtest/gtest.h>

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

#include "cuda/cuda_test_support.h"
#include "model/encoder.h"
#include "support/fixtures.h"
#include "support/goldens.h"

namespace stoke {
namespace {

using namespace test::goldens;

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
  DType dtype;
  bool graphs;
};

class CudaGolden : public ::testing::TestWithParam<Case> {};

TEST_P(CudaGolden, MatchesHuggingFace) {
  STOKE_REQUIRE_GPU(backend);
  const Case& k = GetParam();
  const Fixture fx = open_fixture(k.model);
  const HfConfig& c = fx.folder.config;
  EncoderLoadOptions load;
  load.dtype = k.dtype;
  load.need_classifier = true;
  load.need_pooler = c.model_type == ModelType::bert;
  const LoadedEncoder enc = load_encoder(c, open_model_folder_weights(fx.folder), *backend, load);
  const double tol = k.dtype == DType::f32 ? 1e-5 : 2e-2;

  const PackedBatch batch = pack_golden(fx, "");
  const size_t B = static_cast<size_t>(batch.sequences()), T = static_cast<size_t>(batch.tokens());
  const size_t H = static_cast<size_t>(c.hidden_size), C = static_cast<size_t>(c.num_labels());
  // Room for the graph bucket above T.
  EncoderRunner runner(enc, *backend, static_cast<int64_t>(T) + EncoderRunner::kGraphBucket, static_cast<int64_t>(B));
  runner.set_graphs(k.graphs);

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
    backend->wait(*runner.run(batch, out));
  }
  if (k.graphs) {
    EXPECT_GT(runner.graphs_captured(), 0u) << "the golden batch fits a graph bucket";
  }
  EXPECT_LE(relative_error(hidden, golden_hidden_packed(fx)), tol) << "last_hidden_state";
  for (const auto& [name, values] : pooled) EXPECT_LE(relative_error(values, best_golden(*fx.golden, name)), tol) << name;
  const std::string head_name = c.model_type == ModelType::bert ? "pooler_output" : "cls_head_hidden";
  EXPECT_LE(relative_error(head, best_golden(*fx.golden, head_name)), tol) << head_name;
  EXPECT_LE(relative_error(logits, best_golden(*fx.golden, "logits")), tol) << "logits";

  if (c.model_type == ModelType::bert) {  // sentence pairs
    const PackedBatch pairs = pack_golden(fx, "pair.");
    EncoderRunner pair_runner(enc, *backend, pairs.tokens() + EncoderRunner::kGraphBucket, pairs.sequences());
    pair_runner.set_graphs(k.graphs);
    std::vector<float> pair_head(static_cast<size_t>(pairs.sequences()) * H),
        pair_logits(static_cast<size_t>(pairs.sequences()) * C);
    EncoderOutputs out;
    out.head_hidden = pair_head.data();
    out.logits = pair_logits.data();
    backend->wait(*pair_runner.run(pairs, out));
    EXPECT_LE(relative_error(pair_head, best_golden(*fx.golden, "pair.pooler_output")), tol) << "pair.pooler_output";
    EXPECT_LE(relative_error(pair_logits, best_golden(*fx.golden, "pair.logits")), tol) << "pair.logits";
  }
}

INSTANTIATE_TEST_SUITE_P(All, CudaGolden,
                         ::testing::Values(Case{"tiny-bert", DType::f32, false}, Case{"tiny-bert", DType::f32, true},
                                           Case{"tiny-bert", DType::bf16, false}, Case{"tiny-bert", DType::bf16, true},
                                           Case{"tiny-bert", DType::f16, true}, Case{"tiny-xlmr", DType::f32, false},
                                           Case{"tiny-xlmr", DType::f32, true}, Case{"tiny-xlmr", DType::bf16, true},
                                           Case{"tiny-xlmr", DType::f16, false}),
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
  for (const char* model : {"tiny-bert", "tiny-xlmr"})
    for (bool graphs : {false, true}) {
      const Fixture fx = open_fixture(model);
      const HfConfig& c = fx.folder.config;
      const LoadedEncoder enc = load_encoder(c, open_model_folder_weights(fx.folder), *backend, {});
      std::vector<size_t> lengths;
      const PackedBatch all = pack_golden(fx, "", &lengths);
      const size_t H = static_cast<size_t>(c.hidden_size);
      EncoderRunner runner(enc, *backend, all.tokens() + EncoderRunner::kGraphBucket, all.sequences());
      runner.set_graphs(graphs);
      std::vector<float> batched(static_cast<size_t>(all.sequences()) * H);
      EncoderOutputs out;
      out.pooled = batched.data();
      backend->wait(*runner.run(all, out));
      for (size_t b : {size_t{0}, size_t{7}, size_t{40}, size_t{49}, size_t{65}}) {
        PackedBatch one;
        one.clear();
        const auto begin = all.ids.begin() + all.cu_seqlens[b], end = all.ids.begin() + all.cu_seqlens[b + 1];
        const auto tbegin = all.type_ids.begin() + all.cu_seqlens[b];
        one.add(std::vector<int32_t>(begin, end), std::vector<int32_t>(tbegin, tbegin + (end - begin)), c);
        std::vector<float> alone(H);
        out.pooled = alone.data();
        backend->wait(*runner.run(one, out));
        double num = 0, den = 0;
        for (size_t i = 0; i < H; ++i) {
          num += (alone[i] - batched[b * H + i]) * (alone[i] - batched[b * H + i]);
          den += alone[i] * alone[i];
        }
        // cuBLASLt may sum in another order for another row count: a few
        // ulps, where a leak between rows would be O(1).
        EXPECT_LE(std::sqrt(num / den), 1e-5) << model << " text " << b << (graphs ? " graphs" : " eager");
      }
    }
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

}  // namespace
}  // namespace stoke
