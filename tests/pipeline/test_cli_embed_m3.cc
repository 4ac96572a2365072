// `stoke embed --outputs dense,sparse,colbert` on bge-m3 (the tiny random
// one of tests/data/bge_m3_tiny, goldens by FlagEmbedding 1.3.5): the three
// outputs of one forward in their shards — embeddings .npy, CSR lexical
// weights, ragged ColBERT vectors — equal FlagEmbedding's encode; a killed
// run resumes to the same bytes; verify reads every file and names damage;
// a model without the heads is refused naming the missing file.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "io/csr_shard.h"
#include "io/npy.h"
#include "io/ragged_shard.h"
#include "support/corpus_files.h"
#include "support/fixtures.h"
#include "support/m3_goldens.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

int run(const std::string& args, std::string* err = nullptr, const std::string& env = "") {
  const test::RunResult r = test::run_stoke(args, "/dev/null", env);
  if (err) *err = r.err;
  return r.status;
}

std::string embed_args(const fs::path& input, const fs::path& out, const std::string& extra = "") {
  return "embed --quiet --model " + test::m3::model_dir().string() + " --input " + input.string() + " --output " +
         out.string() + " --outputs dense,sparse,colbert " + extra;
}

std::vector<float> f32_rows(const fs::path& npy) {
  const NpyArray a = read_npy(npy);
  std::vector<float> v(static_cast<size_t>(a.numel()));
  std::memcpy(v.data(), a.data.data(), v.size() * sizeof(float));
  return v;
}

TEST(EmbedM3, ThreeOutputsOfOneForwardEqualFlagEmbedding) {
  const test::m3::Golden g = test::m3::open_golden();
  const fs::path input = test::texts_file("cli-m3-golden", g.texts);
  const fs::path out = test::scratch_dir("cli-m3-golden-out");
  std::string err;
  ASSERT_EQ(run(embed_args(input, out, "--max-length " + std::to_string(g.max_length)), &err), 0) << err;
  const json m = json::parse(read_file(out / "manifest.json"));
  ASSERT_EQ(m["shards"].size(), 1u);
  const auto dense_w = g.get("dense_vecs"), colbert_w = g.get("colbert_vecs"), colbert_off = g.get("colbert_offsets");
  const auto sp_idx = g.get("sparse_indices"), sp_val = g.get("sparse_values"), sp_ptr = g.get("sparse_indptr");
  const int64_t H = m["dimensions"].get<int64_t>(), D = m["outputs"]["colbert"]["dim"].get<int64_t>();
  const std::vector<float> dense = f32_rows(out / "embeddings-00000.npy");
  const CsrRows sparse = read_csr_shard(out, sparse_shard_stem(0), m["outputs"]["sparse"]["columns"].get<int64_t>());
  const RaggedRows colbert = read_ragged_shard(out, colbert_shard_stem(0), D);
  ASSERT_EQ(sparse.rows(), g.texts.size());
  ASSERT_EQ(colbert.offsets.size(), g.texts.size() + 1);
  const double tol = 1e-5;
  for (size_t i = 0; i < g.texts.size(); ++i) {
    EXPECT_LE(test::m3::row_error(&dense[i * H], &dense_w[i * H], static_cast<size_t>(H)), tol) << "dense " << i;
    ASSERT_EQ(colbert.offsets[i + 1] - colbert.offsets[i], colbert_off[i + 1] - colbert_off[i]) << "colbert " << i;
    for (int64_t v = 0; v < colbert.offsets[i + 1] - colbert.offsets[i]; ++v)
      EXPECT_LE(test::m3::row_error(&colbert.vectors[(colbert.offsets[i] + v) * D],
                                    &colbert_w[(static_cast<int64_t>(colbert_off[i]) + v) * D], static_cast<size_t>(D)),
                tol)
          << "colbert " << i << " vector " << v;
    const auto s0 = static_cast<size_t>(sp_ptr[i]), s1 = static_cast<size_t>(sp_ptr[i + 1]);
    ASSERT_EQ(static_cast<size_t>(sparse.indptr[i + 1] - sparse.indptr[i]), s1 - s0) << "sparse " << i;
    double floor = 0;
    for (size_t k = s0; k < s1; ++k) floor = std::max(floor, std::abs(sp_val[k]));
    for (size_t k = s0; k < s1; ++k) {
      const size_t at = static_cast<size_t>(sparse.indptr[i]) + (k - s0);
      EXPECT_EQ(sparse.indices[at], static_cast<int32_t>(sp_idx[k])) << "sparse " << i;
      EXPECT_LE(std::abs(sparse.values[at] - sp_val[k]), tol * floor) << "sparse " << i;
    }
  }
  EXPECT_EQ(run("verify " + out.string(), &err), 0) << err;
}

class EmbedM3Resume : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    input_ = new fs::path(test::fortunes_prefix("cli-m3-input", 400));
    reference_ = new fs::path(test::scratch_dir("cli-m3-reference"));
    std::string err;
    ASSERT_EQ(run(embed_args(*input_, *reference_, "--shard-size 60 --sort-window 128 --batch-tokens 1024"), &err), 0) << err;
  }
  static void TearDownTestSuite() {
    delete input_;
    delete reference_;
  }
  static fs::path* input_;
  static fs::path* reference_;
};
fs::path* EmbedM3Resume::input_ = nullptr;
fs::path* EmbedM3Resume::reference_ = nullptr;

TEST_F(EmbedM3Resume, KilledAtEveryCommitStepResumesByteIdentically) {
  for (const char* at : {"shard-data-renamed:2", "shard-extras-renamed:3", "shard-ids-renamed:2", "before-manifest:4",
                         "batch-collected:6"}) {
    const fs::path out = test::scratch_dir(std::string("cli-m3-crash-") + at);
    EXPECT_EQ(run(embed_args(*input_, out, "--shard-size 60 --sort-window 128 --batch-tokens 1024"), nullptr,
                  std::string("STOKE_CRASH_AT=") + at),
              128 + SIGKILL)
        << at;
    std::string err;
    ASSERT_EQ(run("embed --output " + out.string() + " --resume", &err), 0) << at << ": " << err;
    test::expect_same_output_files(*reference_, out);
  }
}

TEST_F(EmbedM3Resume, VerifyNamesADamagedSparseOrColbertShard) {
  std::string err;
  ASSERT_EQ(run("verify " + reference_->string(), &err), 0) << err;
  for (const std::string name : {"sparse-00001.indptr.npy", "colbert-00002.npy"}) {
    const fs::path out = test::scratch_dir("cli-m3-damaged-" + name);
    fs::copy(*reference_, out, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    std::string bytes = read_file(out / name);
    bytes[bytes.size() - 3] ^= 0x5a;
    std::ofstream(out / name, std::ios::binary | std::ios::trunc) << bytes;
    EXPECT_NE(run("verify " + out.string(), &err), 0) << name;
    EXPECT_NE(err.find(name), std::string::npos) << err;
  }
}

TEST_F(EmbedM3Resume, OutputsAreAnIdentityField) {
  const fs::path out = test::scratch_dir("cli-m3-identity");
  EXPECT_EQ(run(embed_args(*input_, out, "--shard-size 60 --sort-window 128 --batch-tokens 1024"), nullptr,
                "STOKE_CRASH_AT=after-manifest:2"),
            128 + SIGKILL);
  std::string err;
  EXPECT_NE(run("embed --quiet --model " + test::m3::model_dir().string() + " --input " + input_->string() +
                    " --output " + out.string() + " --shard-size 60 --sort-window 128 --batch-tokens 1024 --outputs dense,sparse --resume",
                &err),
            0);
  EXPECT_NE(err.find("outputs differs"), std::string::npos) << err;
}

TEST(EmbedM3Flags, AModelWithoutTheHeadsIsRefusedNamingTheFile) {
  const fs::path input = test::texts_file("cli-m3-flags", {"one text"});
  std::string err;
  EXPECT_NE(run("embed --model " + test::fixture("models/tiny-xlmr").string() + " --input " + input.string() +
                    " --output " + test::scratch_dir("cli-m3-flags-out").string() + " --outputs dense,sparse",
                &err),
            0);
  EXPECT_NE(err.find("has no sparse_linear.pt"), std::string::npos) << err;
  EXPECT_NE(run("embed --model " + test::m3::model_dir().string() + " --input " + input.string() + " --output " +
                    test::scratch_dir("cli-m3-flags-out2").string() + " --outputs dense,lexical",
                &err),
            0);
  EXPECT_NE(err.find("\"lexical\" is not one of dense, sparse, colbert"), std::string::npos) << err;
}

}  // namespace
}  // namespace stoke
