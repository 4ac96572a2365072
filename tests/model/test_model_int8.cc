// --precision int8 at int8 tolerance: for both fixture models and every
// architecture with goldens (tests/golden), the encoder with its layers'
// GEMMs quantized (model/int8_weights, linear_int8) against the Hugging Face
// f32 goldens, by the cosine of the pooled vectors after removing the
// goldens' mean vector (centered cosine; raw cosine hides losses on
// anisotropic embeddings):
// - mean pooling: at least 0.99 for every text;
// - cls pooling (one token's vector: no averaging of the quantization noise,
//   and these models are 32-64 wide): at least 0.99 on average over the
//   texts and 0.98 for every text;
// - classification labels (argmax of the logits) equal f32's: on both fixture
//   models for every text; on the added architectures wherever f32's top two
//   logits differ by more than 1% of the largest |logit| (tiny-mpnet has
//   near-ties of 7e-5 that any rounding flips).
// The bounds reached are printed (docs/performance.md records them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "io/model_folder.h"
#include "model/encoder.h"
#include "support/encoder_goldens.h"
#include "support/goldens.h"

namespace stoke {
namespace {

using namespace test::goldens;

constexpr double kMinCenteredCosine = 0.99;     // per text (mean pooling), mean over texts (cls)
constexpr double kMinCenteredCosineCls = 0.98;  // per text, cls pooling

// Per row: the cosine of got and want after subtracting want's mean row from both.
std::vector<double> centered_cosines(const std::vector<float>& got, const std::vector<double>& want, size_t rows,
                                     size_t dims) {
  std::vector<double> mean(dims, 0.0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t k = 0; k < dims; ++k) mean[k] += want[r * dims + k] / static_cast<double>(rows);
  std::vector<double> out;
  for (size_t r = 0; r < rows; ++r) {
    double dot = 0, ng = 0, nw = 0;
    for (size_t k = 0; k < dims; ++k) {
      const double g = got[r * dims + k] - mean[k], w = want[r * dims + k] - mean[k];
      dot += g * w;
      ng += g * g;
      nw += w * w;
    }
    out.push_back(dot / std::max(std::sqrt(ng * nw), 1e-30));
  }
  return out;
}

struct Int8Case {
  const char* model;
  const char* kernels;
};

class ModelInt8 : public ::testing::TestWithParam<Int8Case> {};

TEST_P(ModelInt8, AgreesWithF32Goldens) {
  const Int8Case& k = GetParam();
  cpu::CpuBackend backend(std::string(k.kernels) == "fast" ? cpu::fast_kernels() : cpu::reference_kernels());
  const Fixture fx = open_fixture(k.model);
  const HfConfig& c = fx.folder.config;
  bool head = true;
  try {
    head_activation(*c.arch);
  } catch (const Error&) {
    head = false;  // DistilBERT's ReLU head: the encoder and pooling are still checked
  }
  EncoderLoadOptions load;
  load.int8_linears = true;
  load.need_classifier = head;
  const LoadedEncoder enc = load_encoder(c, open_model_folder_weights(fx.folder), backend, load);
  ASSERT_TRUE(enc.int8_linears);
  ASSERT_EQ(enc.params.layers[0].qkv_w.dtype, DType::i8);

  const PackedBatch batch = pack_golden(fx, "");
  const size_t B = static_cast<size_t>(batch.sequences()), H = static_cast<size_t>(c.hidden_size),
               C = static_cast<size_t>(c.num_labels());
  EncoderRunner runner(enc, backend, batch.tokens(), batch.sequences());
  std::string report;
  std::vector<float> logits(B * C);
  for (const auto& [name, mode] : {std::pair{"mean_pooled", Pooling::mean}, std::pair{"cls_pooled", Pooling::cls}}) {
    std::vector<float> pooled(B * H);
    EncoderOutputs out;
    out.pooled = pooled.data();
    out.pooling = mode;
    if (head && mode == Pooling::mean) out.logits = logits.data();
    backend.wait(*runner.run(batch, out));
    const std::vector<double> want = best_golden(*fx.golden, name);
    const size_t rows = std::min(B, want.size() / H);  // the added architectures' goldens: the first 16 texts
    ASSERT_GT(rows, 1u);
    const std::vector<double> cos = centered_cosines(pooled, want, rows, H);
    double mean = 0;
    for (double x : cos) mean += x / static_cast<double>(rows);
    const double per_text = mode == Pooling::mean ? kMinCenteredCosine : kMinCenteredCosineCls;
    for (size_t r = 0; r < rows; ++r) EXPECT_GE(cos[r], per_text) << name << " text " << r;
    EXPECT_GE(mean, kMinCenteredCosine) << name << " mean over texts";
    char line[160];
    std::snprintf(line, sizeof line, " %s centered cosine mean %.5f worst %.5f;", name, mean,
                  *std::min_element(cos.begin(), cos.end()));
    report += line;
  }
  const bool fixture = std::string(k.model) == "tiny-bert" || std::string(k.model) == "tiny-xlmr";
  int labels_checked = 0;
  if (head) {
    const std::vector<double> want = best_golden(*fx.golden, "logits");
    const size_t rows = std::min(B, want.size() / C);
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::fabs(v));
    for (size_t r = 0; r < rows && C > 1; ++r) {
      std::vector<double> sorted(want.begin() + static_cast<long>(r * C), want.begin() + static_cast<long>((r + 1) * C));
      std::sort(sorted.rbegin(), sorted.rend());
      if (!fixture && sorted[0] - sorted[1] <= 0.01 * scale) continue;  // a near-tie
      ++labels_checked;
      const auto g = std::max_element(logits.begin() + r * C, logits.begin() + (r + 1) * C) - (logits.begin() + r * C);
      const auto w = std::max_element(want.begin() + r * C, want.begin() + (r + 1) * C) - (want.begin() + r * C);
      EXPECT_EQ(g, w) << "label of text " << r;
    }
  }
  std::printf("%s int8 (%s), %zu texts:%s labels checked %d\n", k.model, k.kernels, B, report.c_str(), labels_checked);
}

INSTANTIATE_TEST_SUITE_P(All, ModelInt8,
                         ::testing::Values(Int8Case{"tiny-bert", "reference"}, Int8Case{"tiny-bert", "fast"},
                                           Int8Case{"tiny-xlmr", "fast"}, Int8Case{"tiny-distilbert", "fast"},
                                           Int8Case{"tiny-electra", "fast"}, Int8Case{"tiny-roberta", "fast"},
                                           Int8Case{"tiny-camembert", "fast"}, Int8Case{"tiny-xlmr5", "fast"},
                                           Int8Case{"tiny-mpnet", "fast"}, Int8Case{"tiny-gte", "fast"},
                                           Int8Case{"tiny-nomic", "fast"}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.model) + "_" + info.param.kernels;
                           for (auto& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace stoke
