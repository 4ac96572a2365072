// The Hugging Face hub cache lookup (io/hf_hub_cache.h) on caches built here
// the way huggingface_hub lays them out: refs/<revision> holding a commit sha,
// snapshots/<sha>/ whose files are symlinks into blobs/.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/hf_hub_cache.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;

const std::string kShaMain = "0123456789abcdef0123456789abcdef01234567";
const std::string kShaOld = "89abcdef0123456789abcdef0123456789abcdef";

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// root/models--org--name with refs/main -> kShaMain, refs/v1 -> kShaOld and
// both snapshots holding config.json as a link into blobs/.
fs::path make_cache(const std::string& test) {
  const fs::path root = test::scratch_dir("hf-hub-cache-" + test);
  const fs::path repo = root / "models--org--name";
  write(repo / "blobs" / "c0ffee", "{}");
  for (const std::string& sha : {kShaMain, kShaOld}) {
    fs::create_directories(repo / "snapshots" / sha);
    fs::create_symlink("../../blobs/c0ffee", repo / "snapshots" / sha / "config.json");
  }
  write(repo / "refs" / "main", kShaMain);  // huggingface_hub writes no newline
  write(repo / "refs" / "v1", kShaOld + "\n");
  return root;
}

std::vector<HubCacheRoot> roots_of(const fs::path& root) { return {{root, "HF_HUB_CACHE"}}; }

std::string error_of(const HubModelRef& ref, const std::vector<HubCacheRoot>& roots) {
  try {
    find_hub_snapshot(ref, roots);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::not_found) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error for " << ref.repo_id << "@" << ref.revision;
  return "";
}

TEST(HubModelRef, ParsesIdsAndRevisions) {
  auto r = parse_hub_model_ref("BAAI/bge-m3");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->repo_id, "BAAI/bge-m3");
  EXPECT_EQ(r->revision, "main");
  r = parse_hub_model_ref("sentence-transformers/all-MiniLM-L6-v2@refs/pr/1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->repo_id, "sentence-transformers/all-MiniLM-L6-v2");
  EXPECT_EQ(r->revision, "refs/pr/1");
  r = parse_hub_model_ref("bert-base-uncased@" + kShaMain);  // a legacy id without an org
  ASSERT_TRUE(r);
  EXPECT_EQ(r->repo_id, "bert-base-uncased");
  EXPECT_EQ(r->revision, kShaMain);
}

TEST(HubModelRef, RefusesWhatCannotBeAnId) {
  for (const char* text : {"", "/abs/path", "./org/name", "../name", "org/name/extra", "org//name", "org/na me",
                           "org/name@", "org/name@../../etc", "org/name@/main", "org/-name", "org/name.", "org/a--b",
                           "org/a..b", "org/name@a//b", "org/name@a/./b"})
    EXPECT_FALSE(parse_hub_model_ref(text)) << text;
}

TEST(HubModelRef, FolderName) {
  EXPECT_EQ(hub_repo_folder_name("BAAI/bge-m3"), "models--BAAI--bge-m3");
  EXPECT_EQ(hub_repo_folder_name("gpt2"), "models--gpt2");
}

TEST(HubCache, ResolvesBranchesTagsAndShas) {
  const fs::path root = make_cache("resolve");
  const fs::path repo = root / "models--org--name";
  HubSnapshot s = find_hub_snapshot({"org/name", "main"}, roots_of(root));
  EXPECT_EQ(s.commit, kShaMain);
  EXPECT_EQ(s.dir, repo / "snapshots" / kShaMain);
  EXPECT_EQ(s.root, root);
  s = find_hub_snapshot({"org/name", "v1"}, roots_of(root));  // a trailing newline in refs/ is fine
  EXPECT_EQ(s.commit, kShaOld);
  EXPECT_EQ(s.revision, "v1");
  s = find_hub_snapshot({"org/name", kShaOld}, roots_of(root));  // a sha is a snapshot directly
  EXPECT_EQ(s.dir, repo / "snapshots" / kShaOld);
  EXPECT_TRUE(fs::is_regular_file(s.dir / "config.json"));  // through the link into blobs/
}

TEST(HubCache, SearchesTheRootsInOrder) {
  const fs::path empty = test::scratch_dir("hf-hub-cache-empty");
  const fs::path root = make_cache("order");
  const HubSnapshot s = find_hub_snapshot({"org/name", "main"}, {{empty, "HF_HUB_CACHE"}, {root, "HOME"}});
  EXPECT_EQ(s.root, root);
}

TEST(HubCache, MissingModelSaysWhereItLookedAndHowToDownload) {
  const fs::path empty = test::scratch_dir("hf-hub-cache-missing");
  const fs::path root = make_cache("missing");
  std::string e = error_of({"org/absent", "main"}, {{empty, "HF_HUB_CACHE"}, {root, "HOME"}});
  EXPECT_NE(e.find("org/absent"), std::string::npos) << e;
  EXPECT_NE(e.find("revision main"), std::string::npos) << e;
  EXPECT_NE(e.find(empty.string() + " ($HF_HUB_CACHE): no models--org--absent"), std::string::npos) << e;
  EXPECT_NE(e.find(root.string() + " ($HOME)"), std::string::npos) << e;
  EXPECT_NE(e.find("never downloads"), std::string::npos) << e;
  EXPECT_NE(e.find("`hf download org/absent`"), std::string::npos) << e;
  EXPECT_NE(e.find("`huggingface-cli download org/absent`"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  // A revision the cache has no ref for, and a sha it has no snapshot for.
  e = error_of({"org/name", "v2"}, roots_of(root));
  EXPECT_NE(e.find("no models--org--name/refs/v2"), std::string::npos) << e;
  EXPECT_NE(e.find("hf download org/name --revision v2"), std::string::npos) << e;
  const std::string other(40, 'f');
  e = error_of({"org/name", other}, roots_of(root));
  EXPECT_NE(e.find("no models--org--name/snapshots/" + other), std::string::npos) << e;
  // No root at all.
  e = error_of({"org/name", "main"}, {});
  EXPECT_NE(e.find("HF_HUB_CACHE, HF_HOME and HOME are all unset"), std::string::npos) << e;
}

TEST(HubCache, DamagedRefIsAFormatErrorNamingTheFile) {
  const fs::path root = make_cache("damaged");
  write(root / "models--org--name" / "refs" / "main", "not a sha");
  try {
    find_hub_snapshot({"org/name", "main"}, roots_of(root));
    FAIL() << "a refs/ file without a sha was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::format);
    EXPECT_NE(std::string(e.what()).find("refs/main"), std::string::npos) << e.what();
  }
}

// The environment decides the roots: HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub.
class HubCacheEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"HF_HUB_CACHE", "HF_HOME", "HOME"}) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value)
        ::setenv(name, value->c_str(), 1);
      else
        ::unsetenv(name);
    }
  }
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

TEST_F(HubCacheEnv, RootsFollowTheVariablesInOrder) {
  EXPECT_TRUE(hf_hub_cache_roots().empty());
  ::setenv("HOME", "/h", 1);
  ::setenv("HF_HOME", "/hf", 1);
  ::setenv("HF_HUB_CACHE", "/cache", 1);
  const auto roots = hf_hub_cache_roots();
  ASSERT_EQ(roots.size(), 3u);
  EXPECT_EQ(roots[0].path, fs::path("/cache"));
  EXPECT_EQ(roots[0].from, "HF_HUB_CACHE");
  EXPECT_EQ(roots[1].path, fs::path("/hf/hub"));
  EXPECT_EQ(roots[2].path, fs::path("/h/.cache/huggingface/hub"));
  ::setenv("HF_HUB_CACHE", "/hf/hub/", 1);  // the same folder twice is searched once
  EXPECT_EQ(hf_hub_cache_roots().size(), 2u);
}

TEST_F(HubCacheEnv, ALocalPathWinsOverAHubId) {
  const fs::path root = make_cache("local-wins");
  ::setenv("HF_HUB_CACHE", root.c_str(), 1);
  const fs::path cwd = test::scratch_dir("hf-hub-cache-cwd");
  fs::create_directories(cwd / "org" / "name");
  const fs::path before = fs::current_path();
  fs::current_path(cwd);
  const ModelLocation local = locate_model("org/name");
  fs::current_path(before);
  EXPECT_FALSE(local.hub);
  EXPECT_EQ(local.dir, fs::path("org/name"));
  const ModelLocation hub = locate_model("org/name@v1");
  ASSERT_TRUE(hub.hub);
  EXPECT_EQ(hub.given, "org/name@v1");
  EXPECT_EQ(hub.hub->commit, kShaOld);
  EXPECT_EQ(hub.dir, root / "models--org--name" / "snapshots" / kShaOld);
  // Not an id, not a path: left for the folder loader to name.
  EXPECT_EQ(locate_model("./no/such/dir").dir, fs::path("./no/such/dir"));
}

}  // namespace
}  // namespace stoke
