// `--model org/name[@revision]` end to end: a fake Hugging Face cache built
// here as huggingface_hub lays one out (the fixture tiny-bert's files as
// blobs/, snapshots/<sha>/ of symlinks into them, refs/ naming the shas),
// found through HF_HUB_CACHE, HF_HOME or HOME, never over the network.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kShaMain = "1111111111111111111111111111111111111111";
const std::string kShaV2 = "2222222222222222222222222222222222222222";

// <root>/models--org--tiny: every fixture file once in blobs/ (named by a
// counter: the cache names them by hash, stoke never looks), each snapshot
// a tree of relative links to them; refs/main -> kShaMain, refs/v2 -> kShaV2.
fs::path make_hub_cache(const fs::path& root) {
  const fs::path repo = root / "models--org--tiny";
  const fs::path model = test::fixture("models/tiny-bert");
  fs::create_directories(repo / "blobs");
  int blob = 0;
  for (const auto& entry : fs::recursive_directory_iterator(model)) {
    if (!entry.is_regular_file()) continue;
    const fs::path rel = entry.path().lexically_relative(model);
    const std::string name = "blob" + std::to_string(blob++);
    fs::copy_file(entry.path(), repo / "blobs" / name);
    for (const std::string& sha : {kShaMain, kShaV2}) {
      const fs::path link = repo / "snapshots" / sha / rel;
      fs::create_directories(link.parent_path());
      fs::create_symlink((repo / "blobs" / name).lexically_relative(link.parent_path()), link);
    }
  }
  fs::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << kShaMain;
  std::ofstream(repo / "refs" / "v2") << kShaV2;
  return repo;
}

std::string texts() { return test::fixture("golden/texts.jsonl").string(); }

// The child's environment: only `set` names a cache; HF_HUB_OFFLINE is not
// set either way (stoke never fetches, so it has nothing to say).
std::string env_with(const std::string& set) {
  return "env -u HF_HUB_CACHE -u HF_HOME -u HF_HUB_OFFLINE HOME=" + test::scratch_dir("hub-model-no-home").string() +
         " " + set;
}

struct Embedded {
  test::RunResult run;
  json manifest;
  std::string vectors;
};

Embedded embed(const std::string& model, const fs::path& out, const std::string& env) {
  Embedded e;
  e.run = test::run_stoke("embed --model " + model + " --input " + texts() + " --output " + out.string() + " --quiet",
                          "/dev/null", env);
  if (e.run.status == 0) {
    e.manifest = json::parse(read_file(out / "manifest.json"));
    e.vectors = read_file(out / "embeddings-00000.npy");
  }
  return e;
}

class HubModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratch_dir(std::string("hub-model-") +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    reference_ = read_file_or_embed();
  }
  // The fixture folder embedded by path: what every hub run must equal bytewise.
  std::string read_file_or_embed() {
    const Embedded e = embed(test::fixture("models/tiny-bert").string(), dir_ / "by-path", env_with(""));
    EXPECT_EQ(e.run.status, 0) << e.run.err;
    return e.vectors;
  }
  fs::path dir_;
  std::string reference_;
};

TEST_F(HubModel, EmbedFindsTheSnapshotThroughEachCacheVariable) {
  struct Case {
    const char* name;
    fs::path root;
    std::string env;
  } cases[] = {{"hf-hub-cache", dir_ / "cache", "HF_HUB_CACHE=" + (dir_ / "cache").string()},
               {"hf-home", dir_ / "hf-home" / "hub", "HF_HOME=" + (dir_ / "hf-home").string()},
               {"home", dir_ / "home" / ".cache" / "huggingface" / "hub", ""}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path repo = make_hub_cache(c.root);
    std::string env = env_with(c.env);
    if (std::string(c.name) == "home") env += " HOME=" + (dir_ / "home").string();
    const Embedded e = embed("org/tiny", dir_ / (std::string("out-") + c.name), env);
    ASSERT_EQ(e.run.status, 0) << e.run.err;
    EXPECT_EQ(e.vectors, reference_) << "the snapshot's vectors differ from the folder's";
    const json& source = e.manifest["model"]["source"];
    EXPECT_EQ(source["given"], "org/tiny") << source.dump();
    EXPECT_EQ(source["path"], (repo / "snapshots" / kShaMain).string()) << source.dump();
    EXPECT_EQ(source["hub"]["repo_id"], "org/tiny") << source.dump();
    EXPECT_EQ(source["hub"]["revision"], "main") << source.dump();
    EXPECT_EQ(source["hub"]["commit"], kShaMain) << source.dump();
  }
}

TEST_F(HubModel, RevisionByBranchAndBySha) {
  make_hub_cache(dir_ / "cache");
  const std::string env = env_with("HF_HUB_CACHE=" + (dir_ / "cache").string());
  for (const std::string& revision : {std::string("v2"), kShaV2}) {
    SCOPED_TRACE(revision);
    const Embedded e = embed("org/tiny@" + revision, dir_ / ("out-" + revision), env);
    ASSERT_EQ(e.run.status, 0) << e.run.err;
    EXPECT_EQ(e.vectors, reference_);
    const json& source = e.manifest["model"]["source"];
    EXPECT_EQ(source["given"], "org/tiny@" + revision);
    EXPECT_EQ(source["hub"]["revision"], revision);
    EXPECT_EQ(source["hub"]["commit"], kShaV2);
  }
}

TEST_F(HubModel, ALocalFolderSpelledLikeAnIdWins) {
  make_hub_cache(dir_ / "cache");
  const fs::path cwd = dir_ / "cwd";
  fs::create_directories(cwd / "org");
  fs::create_directory_symlink(test::fixture("models/tiny-bert"), cwd / "org" / "tiny");
  const Embedded e = embed("org/tiny", dir_ / "out",
                           "cd " + cwd.string() + " && " + env_with("HF_HUB_CACHE=" + (dir_ / "cache").string()));
  ASSERT_EQ(e.run.status, 0) << e.run.err;
  EXPECT_EQ(e.vectors, reference_);
  EXPECT_TRUE(e.manifest["model"]["source"]["hub"].is_null()) << e.manifest["model"].dump();
  EXPECT_EQ(e.manifest["model"]["source"]["path"], (cwd / "org" / "tiny").string());
}

TEST_F(HubModel, AMissingModelOrRevisionIsOneLineSayingWhereAndHow) {
  make_hub_cache(dir_ / "cache");
  const fs::path home = dir_ / "home";
  const std::string env = env_with("HF_HUB_CACHE=" + (dir_ / "cache").string() + " HOME=" + home.string());
  struct Case {
    std::string model, mentions;
  } cases[] = {{"org/absent", "revision main of Hugging Face model org/absent"},
               {"org/tiny@v3", "no models--org--tiny/refs/v3"},
               {"org/tiny@" + std::string(40, 'a'), "no models--org--tiny/snapshots/" + std::string(40, 'a')}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model);
    const Embedded e = embed(c.model, dir_ / "out", env);
    EXPECT_EQ(e.run.status, 1);
    const std::string& err = e.run.err;
    EXPECT_EQ(err.rfind("stoke: error: " + c.model + ": no such model folder", 0), 0u) << err;
    EXPECT_NE(err.find(c.mentions), std::string::npos) << err;
    EXPECT_NE(err.find((dir_ / "cache").string() + " ($HF_HUB_CACHE)"), std::string::npos) << err;
    EXPECT_NE(err.find((home / ".cache" / "huggingface" / "hub").string() + " ($HOME)"), std::string::npos) << err;
    EXPECT_NE(err.find("stoke never downloads"), std::string::npos) << err;
    EXPECT_NE(err.find("hf download org/"), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), err.size() - 1) << "more than one line: " << err;
    EXPECT_FALSE(fs::exists(dir_ / "out" / "manifest.json"));
  }
}

// Every job that takes --model resolves it the same way: tokenize (no
// weights), train (run.json records the snapshot), and --config naming the model.
TEST_F(HubModel, TokenizeTrainAndConfigResolveItToo) {
  make_hub_cache(dir_ / "cache");
  const std::string env = env_with("HF_HUB_CACHE=" + (dir_ / "cache").string());
  const auto by_path = test::run_stoke("tokenize --model " + test::fixture("models/tiny-bert").string() + " --input " +
                                       texts() + " --quiet", "/dev/null", env);
  ASSERT_EQ(by_path.status, 0) << by_path.err;
  const auto by_id = test::run_stoke("tokenize --model org/tiny@v2 --input " + texts() + " --quiet", "/dev/null", env);
  ASSERT_EQ(by_id.status, 0) << by_id.err;
  EXPECT_EQ(by_id.out, by_path.out);

  const fs::path config = dir_ / "config.json";
  std::ofstream(config) << R"({"model": "org/tiny"})";
  const auto from_config = test::run_stoke("embed --config " + config.string() + " --input " + texts() +
                                           " --quiet --output " + (dir_ / "out-config").string(), "/dev/null", env);
  ASSERT_EQ(from_config.status, 0) << from_config.err;
  const json manifest = json::parse(read_file(dir_ / "out-config" / "manifest.json"));
  EXPECT_EQ(manifest["model"]["source"]["hub"]["commit"], kShaMain) << manifest["model"].dump();

  const fs::path data = dir_ / "train.jsonl";
  {
    std::ofstream out(data);
    for (int i = 0; i < 8; ++i) out << json{{"text", "text number " + std::to_string(i)}, {"label", i % 2}}.dump() << "\n";
  }
  const auto train = test::run_stoke("train --model org/tiny --train " + data.string() + " --max-steps 1 --batch-size 4 "
                                     "--quiet --output " + (dir_ / "run").string(), "/dev/null", env);
  ASSERT_EQ(train.status, 0) << train.err;
  const json run = json::parse(read_file(dir_ / "run" / "run.json"));
  EXPECT_EQ(run["model"]["given"], "org/tiny") << run["model"].dump();
  EXPECT_EQ(run["model"]["hub"]["commit"], kShaMain) << run["model"].dump();
  // The trained folder holds copies, not the cache's links (relative links
  // into blobs/ would dangle there).
  for (const char* file : {"tokenizer.json", "vocab.txt", "1_Pooling/config.json", "modules.json"}) {
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir_ / "run" / file))) << file;
  }
}

}  // namespace
}  // namespace stoke
