// `stoke embed --role query|document` on a PyLate ColBERT model (the tiny
// random one of tests/data/colbert_tiny, goldens by PyLate 1.6.0): its
// default output is colbert alone, the ragged shards read back equal
// ColBERT.encode(is_query=...) per vector; --outputs dense / sparse and
// --max-length are refused naming why; the role is an identity field; a
// killed run resumes to the same bytes; verify passes.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "io/ragged_shard.h"
#include "support/colbert_goldens.h"
#include "support/corpus_files.h"
#include "support/fixtures.h"

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
  return "embed --quiet --device cpu --model " + test::colbert::model_dir().string() + " --input " + input.string() +
         " --output " + out.string() + " " + extra;
}

TEST(EmbedColbert, QueriesAndDocumentsEqualPylateEncode) {
  const test::colbert::Golden g = test::colbert::open_golden();
  const fs::path input = test::texts_file("cli-colbert-golden", g.texts);
  for (const std::string role : {"query", "document"}) {
    const fs::path out = test::scratch_dir("cli-colbert-golden-" + role);
    std::string err;
    ASSERT_EQ(run(embed_args(input, out, "--role " + role), &err), 0) << err;
    const json m = json::parse(read_file(out / "manifest.json"));
    ASSERT_EQ(m["shards"].size(), 1u);
    EXPECT_EQ(m["outputs"]["dense"], false);
    EXPECT_EQ(m["outputs"]["colbert"]["source"], "colbert");
    EXPECT_EQ(m["outputs"]["colbert"]["role"], role);
    EXPECT_EQ(m["outputs"]["colbert"]["query_length"], 32);
    EXPECT_EQ(m["outputs"]["colbert"]["document_length"], 180);
    EXPECT_FALSE(fs::exists(out / "embeddings-00000.npy")) << "a ColBERT model has no sentence vector";
    const int64_t D = m["outputs"]["colbert"]["dim"].get<int64_t>();
    ASSERT_EQ(D, g.dim);
    const RaggedRows got = read_ragged_shard(out, colbert_shard_stem(0), D);
    const auto want = g.get(role + "_vecs"), off = g.get(role + "_offsets");
    ASSERT_EQ(got.offsets.size(), g.texts.size() + 1);
    for (size_t i = 0; i < g.texts.size(); ++i) {
      ASSERT_EQ(got.offsets[i + 1] - got.offsets[i], static_cast<int64_t>(off[i + 1] - off[i])) << role << " " << i;
      for (int64_t v = 0; v < got.offsets[i + 1] - got.offsets[i]; ++v)
        EXPECT_LE(test::colbert::row_error(&got.vectors[static_cast<size_t>((got.offsets[i] + v) * D)],
                                           &want[static_cast<size_t>((static_cast<int64_t>(off[i]) + v) * D)],
                                           static_cast<size_t>(D)),
                  1e-5)
            << role << " " << i << " vector " << v;
    }
    EXPECT_EQ(run("verify " + out.string(), &err), 0) << err;
  }
}

TEST(EmbedColbert, DenseSparseAndMaxLengthAreRefusedNamingWhy) {
  const fs::path input = test::texts_file("cli-colbert-flags", {"one text"});
  std::string err;
  EXPECT_NE(run(embed_args(input, test::scratch_dir("cli-colbert-flags-1"), "--outputs dense"), &err), 0);
  EXPECT_NE(err.find("--outputs dense"), std::string::npos) << err;
  EXPECT_NE(err.find("is a ColBERT model"), std::string::npos) << err;
  EXPECT_NE(run(embed_args(input, test::scratch_dir("cli-colbert-flags-2"), "--outputs colbert,sparse"), &err), 0);
  EXPECT_NE(err.find("--outputs sparse"), std::string::npos) << err;
  EXPECT_NE(run(embed_args(input, test::scratch_dir("cli-colbert-flags-3"), "--max-length 64"), &err), 0);
  EXPECT_NE(err.find("query_length / document_length"), std::string::npos) << err;
  EXPECT_NE(run(embed_args(input, test::scratch_dir("cli-colbert-flags-4"), "--role questions"), &err), 0);
  EXPECT_NE(err.find("--role"), std::string::npos) << err;
  // One error line, no crash.
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

class EmbedColbertResume : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    input_ = new fs::path(test::fortunes_prefix("cli-colbert-input", 300));
    reference_ = new fs::path(test::scratch_dir("cli-colbert-reference"));
    std::string err;
    ASSERT_EQ(run(embed_args(*input_, *reference_, std::string("--role query ") + kSettings), &err), 0) << err;
  }
  static void TearDownTestSuite() {
    delete input_;
    delete reference_;
  }
  static constexpr const char* kSettings = "--shard-size 60 --sort-window 128 --batch-tokens 1024";
  static fs::path* input_;
  static fs::path* reference_;
};
fs::path* EmbedColbertResume::input_ = nullptr;
fs::path* EmbedColbertResume::reference_ = nullptr;

TEST_F(EmbedColbertResume, KilledAtEveryCommitStepResumesByteIdentically) {
  for (const char* at : {"shard-data-renamed:2", "shard-extras-renamed:3", "shard-ids-renamed:2", "before-manifest:4",
                         "batch-collected:6"}) {
    const fs::path out = test::scratch_dir(std::string("cli-colbert-crash-") + at);
    EXPECT_EQ(run(embed_args(*input_, out, std::string("--role query ") + kSettings), nullptr,
                  std::string("STOKE_CRASH_AT=") + at),
              128 + SIGKILL)
        << at;
    std::string err;
    ASSERT_EQ(run("embed --output " + out.string() + " --resume", &err), 0) << at << ": " << err;
    test::expect_same_output_files(*reference_, out);
  }
  std::string err;
  EXPECT_EQ(run("verify " + reference_->string(), &err), 0) << err;
}

TEST_F(EmbedColbertResume, TheRoleIsAnIdentityField) {
  const fs::path out = test::scratch_dir("cli-colbert-identity");
  EXPECT_EQ(run(embed_args(*input_, out, std::string("--role query ") + kSettings), nullptr,
                "STOKE_CRASH_AT=after-manifest:2"),
            128 + SIGKILL);
  std::string err;
  EXPECT_NE(run(embed_args(*input_, out, std::string("--role document --resume ") + kSettings), &err), 0);
  EXPECT_NE(err.find("outputs differs"), std::string::npos) << err;
}

}  // namespace
}  // namespace stoke
