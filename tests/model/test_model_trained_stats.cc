// stoke's f32 against a float64 run of a model whose activations have a
// trained encoder's statistics (tests/golden/make_trained_stats_goldens.py;
// README "tiny-mpnet-trained"): rows with means in the hundreds and a spread
// of hundredths, outlier dimensions, hidden states in the hundreds, and texts
// with runs of one token up to 512 tokens long. On every text, stoke's
// relative L2 distance to float64 must be at most twice torch float32's
// (issue 36): torch's own f32 error on the same input is the measure of what
// f32 allows there. The random fixtures cannot show this: their activations
// are of unit scale with zero mean, where every f32 method is accurate.
// Both kernel sets; the fast ones in one batch of all texts and one text per
// batch (GEMM results depend on the batch's shape).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "model/encoder.h"
#include "support/goldens.h"

namespace stoke {
namespace {

using namespace test::goldens;

struct Case {
  const char* kernels;  // "reference" or "fast"
  bool one_text_per_batch;
};

// ||got - want|| / ||want|| over one row of H values.
double row_distance(const double* got, const double* want, int64_t H) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < H; ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

class TrainedStats : public ::testing::TestWithParam<Case> {};

TEST_P(TrainedStats, WithinTwiceTorchF32ErrorOnEveryText) {
  const Case& k = GetParam();
  const Fixture fx = open_fixture("tiny-mpnet-trained");
  const HfConfig& c = fx.folder.config;
  const std::vector<double> ids = golden(*fx.golden, "input_ids"), cu = golden(*fx.golden, "cu_seqlens");
  const std::vector<double> torch_f32 = golden(*fx.golden, "mean_pooled_normalized");
  const std::vector<double> f64 = golden(*fx.golden, "mean_pooled_normalized.f64");
  const int64_t N = static_cast<int64_t>(cu.size()) - 1, H = c.hidden_size;
  ASSERT_EQ(static_cast<int64_t>(f64.size()), N * H);

  cpu::CpuBackend backend(std::string(k.kernels) == "fast" ? cpu::fast_kernels() : cpu::reference_kernels());
  EncoderLoadOptions load;
  load.dtype = DType::f32;
  const LoadedEncoder enc = load_encoder(c, open_model_folder_weights(fx.folder), backend, load);
  auto text = [&](int64_t n) {
    std::vector<int32_t> seq;
    for (int64_t t = static_cast<int64_t>(cu[static_cast<size_t>(n)]); t < cu[static_cast<size_t>(n) + 1]; ++t)
      seq.push_back(static_cast<int32_t>(ids[static_cast<size_t>(t)]));
    return seq;
  };
  // Texts [first, first + count) as one batch; their vectors into pooled.
  std::vector<float> pooled(static_cast<size_t>(N * H));
  EncoderRunner runner(enc, backend, static_cast<int64_t>(ids.size()), N);
  auto run = [&](int64_t first, int64_t count) {
    PackedBatch batch;
    batch.clear();
    for (int64_t n = first; n < first + count; ++n) {
      const std::vector<int32_t> seq = text(n);
      batch.add(seq, std::vector<int32_t>(seq.size(), 0), c);
    }
    EncoderOutputs out;
    out.pooled = pooled.data() + first * H;
    out.pooling = Pooling::mean;
    out.normalize = true;
    backend.wait(*runner.run(batch, out));
  };
  if (k.one_text_per_batch)
    for (int64_t n = 0; n < N; ++n) run(n, 1);
  else
    run(0, N);

  for (int64_t n = 0; n < N; ++n) {
    const std::vector<double> got(pooled.begin() + n * H, pooled.begin() + (n + 1) * H);
    const double mine = row_distance(got.data(), f64.data() + n * H, H);
    const double torch = row_distance(torch_f32.data() + n * H, f64.data() + n * H, H);
    EXPECT_LE(mine, 2 * torch) << "text " << n << " (" << cu[static_cast<size_t>(n) + 1] - cu[static_cast<size_t>(n)]
                               << " tokens): stoke f32 " << mine << " from float64, torch f32 " << torch;
  }
}

INSTANTIATE_TEST_SUITE_P(All, TrainedStats,
                         ::testing::Values(Case{"reference", false}, Case{"fast", false}, Case{"fast", true}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.kernels) +
                                  (info.param.one_text_per_batch ? "_one_text_per_batch" : "_one_batch");
                         });

}  // namespace
}  // namespace stoke
