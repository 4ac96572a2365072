// `stoke embed` on a SPLADE sparse encoder (the tiny random one of
// tests/data/splade_tiny, goldens by sentence-transformers 6.2.0's
// SparseEncoder.encode): its default output is sparse rows, written as CSR
// shards equal to encode()'s (and to encode(max_active_dims=8) with
// --sparse-top-k 8); dense and colbert are refused naming why; a killed run
// resumes to the same bytes; the pooling and top-k are identity fields;
// verify passes; inspect says what the folder is.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "io/csr_shard.h"
#include "support/corpus_files.h"
#include "support/fixtures.h"
#include "support/splade_goldens.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

int run(const std::string& args, std::string* err = nullptr, const std::string& env = "", std::string* out = nullptr) {
  const test::RunResult r = test::run_stoke(args, "/dev/null", env);
  if (err) *err = r.err;
  if (out) *out = r.out;
  return r.status;
}

std::string embed_args(const fs::path& input, const fs::path& out, const std::string& extra = "") {
  return "embed --quiet --model " + test::splade::model_dir().string() + " --input " + input.string() + " --output " +
         out.string() + " " + extra;
}

// The shards of `out` against golden variant `name`: same ids, weights within 1e-5 of the row's largest.
void expect_rows_match(const fs::path& out, const test::splade::Golden& g, const std::string& name) {
  const json m = json::parse(read_file(out / "manifest.json"));
  ASSERT_EQ(m["shards"].size(), 1u);
  const CsrRows sparse = read_csr_shard(out, sparse_shard_stem(0), m["outputs"]["sparse"]["columns"].get<int64_t>());
  const auto sp_idx = g.get(name + "_indices"), sp_val = g.get(name + "_values"), sp_ptr = g.get(name + "_indptr");
  ASSERT_EQ(sparse.rows(), g.texts.size());
  for (size_t i = 0; i < g.texts.size(); ++i) {
    const auto s0 = static_cast<size_t>(sp_ptr[i]), s1 = static_cast<size_t>(sp_ptr[i + 1]);
    ASSERT_EQ(static_cast<size_t>(sparse.indptr[i + 1] - sparse.indptr[i]), s1 - s0) << name << " row " << i;
    double floor = 0;
    for (size_t k = s0; k < s1; ++k) floor = std::max(floor, std::abs(sp_val[k]));
    for (size_t k = s0; k < s1; ++k) {
      const size_t at = static_cast<size_t>(sparse.indptr[i]) + (k - s0);
      EXPECT_EQ(sparse.indices[at], static_cast<int32_t>(sp_idx[k])) << name << " row " << i;
      EXPECT_LE(std::abs(sparse.values[at] - sp_val[k]), 1e-5 * floor) << name << " row " << i;
    }
  }
}

TEST(EmbedSplade, SparseRowsByDefaultEqualSentenceTransformers) {
  const test::splade::Golden g = test::splade::open_golden();
  const fs::path input = test::texts_file("cli-splade-golden", g.texts);
  const fs::path out = test::scratch_dir("cli-splade-golden-out");
  std::string err;
  ASSERT_EQ(run(embed_args(input, out), &err), 0) << err;
  expect_rows_match(out, g, "max");
  const json m = json::parse(read_file(out / "manifest.json"));
  EXPECT_EQ(m["outputs"]["dense"], false);
  EXPECT_EQ(m["outputs"]["sparse"]["source"], "splade");
  EXPECT_EQ(m["outputs"]["sparse"]["pooling"], "max");
  EXPECT_EQ(m["outputs"]["sparse"]["activation"], "relu");
  EXPECT_EQ(m["outputs"]["sparse"]["top_k"], 0);
  EXPECT_EQ(m["outputs"]["sparse"]["columns"], 3000);
  for (const auto& e : fs::directory_iterator(out))
    EXPECT_EQ(e.path().filename().string().rfind("embeddings-", 0), std::string::npos) << e.path();  // no dense shard
  EXPECT_EQ(run("verify " + out.string(), &err), 0) << err;
}

TEST(EmbedSplade, SparseTopKKeepsTheLargestAsMaxActiveDims) {
  const test::splade::Golden g = test::splade::open_golden();
  const fs::path input = test::texts_file("cli-splade-topk", g.texts);
  const fs::path out = test::scratch_dir("cli-splade-topk-out");
  std::string err;
  ASSERT_EQ(run(embed_args(input, out, "--outputs sparse --sparse-top-k " + std::to_string(g.top_k)), &err), 0) << err;
  expect_rows_match(out, g, "top8");
  EXPECT_EQ(json::parse(read_file(out / "manifest.json"))["outputs"]["sparse"]["top_k"], g.top_k);
}

TEST(EmbedSplade, OutputsItDoesNotGiveAreRefusedNamingWhy) {
  const fs::path input = test::texts_file("cli-splade-flags", {"one text"});
  std::string err;
  for (const char* outputs : {"dense", "dense,sparse"}) {
    EXPECT_NE(run(embed_args(input, test::scratch_dir("cli-splade-flags-out"), std::string("--outputs ") + outputs), &err), 0);
    EXPECT_NE(err.find("is a SPLADE sparse encoder"), std::string::npos) << err;
    EXPECT_NE(err.find("no dense sentence vector"), std::string::npos) << err;
  }
  EXPECT_NE(run(embed_args(input, test::scratch_dir("cli-splade-flags-out"), "--outputs colbert"), &err), 0);
  EXPECT_NE(err.find("no ColBERT vectors"), std::string::npos) << err;
  EXPECT_NE(run(embed_args(input, test::scratch_dir("cli-splade-flags-out"), "--sparse-top-k -1"), &err), 0);
  EXPECT_NE(err.find("--sparse-top-k"), std::string::npos) << err;
  // A dense model: no sparse rows to cut.
  EXPECT_NE(run("embed --quiet --model " + test::fixture("models/tiny-bert").string() + " --input " + input.string() +
                    " --output " + test::scratch_dir("cli-splade-flags-out2").string() + " --sparse-top-k 5",
                &err),
            0);
  EXPECT_NE(err.find("--sparse-top-k 5: keeps the largest sparse weights"), std::string::npos) << err;
}

TEST(EmbedSplade, InspectSaysItIsASpladeSparseEncoder) {
  std::string err, out;
  ASSERT_EQ(run("inspect " + test::splade::model_dir().string(), &err, "", &out), 0) << err;
  EXPECT_NE(out.find("kind: SPLADE sparse encoder"), std::string::npos) << out;
  EXPECT_NE(out.find("pooling_strategy max, activation relu"), std::string::npos) << out;
}

// Inference-free SPLADE (a Router): --role query gives encode_query's rows
// (static weights, no forward), the default role encode_document's; the role
// is an identity field there.
TEST(EmbedSplade, InferenceFreeRolesEqualEncodeQueryAndEncodeDocument) {
  const test::splade::Golden g = test::splade::open_golden();
  const fs::path model = test::splade::data_dir() / "inference_free";
  const fs::path input = test::texts_file("cli-splade-free", g.texts);
  std::string err;
  const fs::path queries = test::scratch_dir("cli-splade-free-queries"), docs = test::scratch_dir("cli-splade-free-docs");
  const std::string base = "embed --quiet --model " + model.string() + " --input " + input.string() + " --output ";
  ASSERT_EQ(run(base + queries.string() + " --role query", &err), 0) << err;
  expect_rows_match(queries, g, "query");
  ASSERT_EQ(run(base + docs.string(), &err), 0) << err;
  expect_rows_match(docs, g, "max");
  const json m = json::parse(read_file(queries / "manifest.json"));
  EXPECT_EQ(m["outputs"]["sparse"]["inference_free"], true);
  EXPECT_EQ(m["outputs"]["sparse"]["role"], "query");
  EXPECT_EQ(run("verify " + queries.string(), &err), 0) << err;
  EXPECT_NE(run(base + queries.string() + " --role document --resume", &err), 0);
  EXPECT_NE(err.find("outputs differs"), std::string::npos) << err;
  std::string out;
  ASSERT_EQ(run("inspect " + model.string(), &err, "", &out), 0) << err;
  EXPECT_NE(out.find("inference-free: --role query"), std::string::npos) << out;
}

class EmbedSpladeResume : public ::testing::Test {
 protected:
  static constexpr const char* kSettings = "--shard-size 60 --sort-window 128 --batch-tokens 1024";
  static void SetUpTestSuite() {
    input_ = new fs::path(test::fortunes_prefix("cli-splade-input", 400));
    reference_ = new fs::path(test::scratch_dir("cli-splade-reference"));
    std::string err;
    ASSERT_EQ(run(embed_args(*input_, *reference_, kSettings), &err), 0) << err;
  }
  static void TearDownTestSuite() {
    delete input_;
    delete reference_;
  }
  static fs::path* input_;
  static fs::path* reference_;
};
fs::path* EmbedSpladeResume::input_ = nullptr;
fs::path* EmbedSpladeResume::reference_ = nullptr;

TEST_F(EmbedSpladeResume, KilledAtEveryCommitStepResumesByteIdentically) {
  for (const char* at : {"shard-extras-renamed:3", "shard-ids-renamed:2", "before-manifest:4", "batch-collected:6"}) {
    const fs::path out = test::scratch_dir(std::string("cli-splade-crash-") + at);
    EXPECT_EQ(run(embed_args(*input_, out, kSettings), nullptr, std::string("STOKE_CRASH_AT=") + at), 128 + SIGKILL) << at;
    std::string err;
    ASSERT_EQ(run("embed --output " + out.string() + " --resume", &err), 0) << at << ": " << err;
    test::expect_same_output_files(*reference_, out);
  }
  std::string err;
  EXPECT_EQ(run("verify " + reference_->string(), &err), 0) << err;
}

TEST_F(EmbedSpladeResume, PoolingAndTopKAreIdentityFields) {
  const fs::path out = test::scratch_dir("cli-splade-identity");
  EXPECT_EQ(run(embed_args(*input_, out, kSettings), nullptr, "STOKE_CRASH_AT=after-manifest:2"), 128 + SIGKILL);
  std::string err;
  EXPECT_NE(run(embed_args(*input_, out, std::string(kSettings) + " --sparse-top-k 4 --resume"), &err), 0);
  EXPECT_NE(err.find("outputs differs"), std::string::npos) << err;
  // The same folder's model with sum pooling is another vector space.
  EXPECT_NE(run("embed --quiet --model " + test::splade::variant_model("sum").string() + " --input " + input_->string() +
                    " --output " + out.string() + " " + kSettings + " --resume",
                &err),
            0);
  EXPECT_NE(err.find("differs"), std::string::npos) << err;
}

}  // namespace
}  // namespace stoke
