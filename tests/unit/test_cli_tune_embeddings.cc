// What `stoke tune` reads back from a trial's output folder: the vectors as
// written, whether embed wrote f32 or f16 shards (--output-dtype f16 used to be
// read as f32: pairs of halves taken for floats, and reads past the data).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/half.h"
#include "io/npy.h"
#include "jobs/tune_embeddings.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;

fs::path embed(const fs::path& dir, const std::string& dtype) {
  const fs::path out = dir / dtype;
  const auto r = test::run_stoke("embed --model " + test::fixture("models/tiny-bert").string() + " --input " +
                                 test::fixture("golden/texts.jsonl").string() + " --shard-size 3 --quiet --output " +
                                 out.string() + " --output-dtype " + dtype);
  EXPECT_EQ(r.status, 0) << r.err;
  return out;
}

TEST(TuneEmbeddings, F16ShardsReadAsTheirValues) {
  const fs::path dir = test::scratch_dir("tune-embeddings-f16");
  int64_t d32 = 0, d16 = 0;
  const std::vector<float> f32 = read_output_embeddings(embed(dir, "f32"), &d32);
  const std::vector<float> f16v = read_output_embeddings(embed(dir, "f16"), &d16);
  ASSERT_GT(d32, 0);
  EXPECT_EQ(d16, d32);
  ASSERT_EQ(f16v.size(), f32.size()) << "every row of every shard, once";
  ASSERT_TRUE(fs::exists(dir / "f16" / "embeddings-00001.npy")) << "the test needs more than one shard";
  // Each f16 value is its f32 value rounded to half precision, exactly.
  for (size_t i = 0; i < f32.size(); ++i) ASSERT_EQ(f16v[i], to_float(to_f16(f32[i]))) << "element " << i;
  const CosineAgreement q = cosine_agreement(f32, f16v, d32);
  EXPECT_EQ(q.rows, f32.size() / static_cast<size_t>(d32));
  EXPECT_LT(q.mean_gap, 1e-5);
  EXPECT_GT(q.worst, 1 - 1e-5);
}

TEST(TuneEmbeddings, OtherElementTypesAndShortFilesAreRefused) {
  const fs::path dir = test::scratch_dir("tune-embeddings-bad");
  const std::string header = npy_header(DType::f32, 2, 4);
  auto write = [&](const fs::path& folder, const std::string& bytes) {
    fs::create_directories(folder);
    std::FILE* f = std::fopen((folder / "embeddings-00000.npy").c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  };
  write(dir / "short", header + std::string(8 * 4 - 1, '\0'));
  int64_t dims = 0;
  EXPECT_THROW(read_output_embeddings(dir / "short", &dims), Error);
  std::string f8 = header;
  f8.replace(f8.find("<f4"), 3, "<f8");
  write(dir / "f8", f8 + std::string(8 * 8, '\0'));
  EXPECT_THROW(read_output_embeddings(dir / "f8", &dims), Error);
}

TEST(TuneEmbeddings, NanRowsAgreeWithNothing) {
  const std::vector<float> a = {1, 0, 0, 1}, c = {1, 0, NAN, 1};
  const CosineAgreement q = cosine_agreement(a, c, 2);
  EXPECT_EQ(q.rows, 2u);
  EXPECT_EQ(q.worst, -1);
}

// Centered cosine (the int8 gate): anisotropic vectors that share one large
// direction agree by raw cosine even when what tells them apart is lost;
// after removing the reference's mean vector they do not.
TEST(TuneEmbeddings, CenteredCosineSeesWhatRawCosineHides) {
  // Reference rows: 10 + small differences; candidate: the same large part,
  // its differences replaced by noise of the same size.
  const std::vector<float> a = {10, 1, 0, 10, 0, 1, 10, -1, 0, 10, 0, -1};
  const std::vector<float> c = {10, 0, 1, 10, -1, 0, 10, 0, -1, 10, 1, 0};
  const CosineAgreement q = cosine_agreement(a, c, 3);
  EXPECT_EQ(q.rows, 4u);
  EXPECT_GT(q.worst, 0.99);                 // raw: looks fine
  EXPECT_NEAR(q.centered_mean, 0.0, 1e-9);  // centered: the differences are unrelated
  EXPECT_LE(q.centered_worst, q.centered_mean);
  const CosineAgreement same = cosine_agreement(a, a, 3);
  EXPECT_NEAR(same.centered_mean, 1.0, 1e-12);
  EXPECT_NEAR(same.centered_worst, 1.0, 1e-12);
}

// The worst centered cosine is one text's: one row turned around while the
// others are exact gives a mean near 1 and a worst of -1.
TEST(TuneEmbeddings, CenteredWorstIsTheWorstText) {
  const std::vector<float> a = {3, 1, 1, 3, 2, 2, 0, 4, 1, 1, 4, 0};
  std::vector<float> c = a;
  // Row 2 mirrored through the reference's mean vector: centered, it points the other way.
  const double mean[4] = {(3 + 2 + 1) / 3.0, (1 + 2 + 1) / 3.0, (1 + 0 + 4) / 3.0, (3 + 4 + 0) / 3.0};
  for (int k = 0; k < 4; ++k) c[8 + k] = static_cast<float>(2 * mean[k] - a[8 + k]);
  const CosineAgreement q = cosine_agreement(a, c, 4);
  EXPECT_EQ(q.rows, 3u);
  EXPECT_NEAR(q.centered_worst, -1.0, 1e-6);
  EXPECT_NEAR(q.centered_mean, (1 + 1 - 1) / 3.0, 1e-6);
}

}  // namespace
}  // namespace stoke
