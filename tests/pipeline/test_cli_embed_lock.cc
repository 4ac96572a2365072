// One writer per embed output folder, and --overwrite that removes only what
// the previous run wrote (RELIABILITY 14-15), against the real binary: two
// runs started together into one folder (exactly one succeeds, the other
// names the holder, the folder verifies); a --resume while the first run is
// mid-commit (it fails at once and the first run completes intact); a holder
// killed with SIGKILL releases the folder; a user's files stop --overwrite.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/file_util.h"
#include "io/atomic_file.h"
#include "io/folder_lock.h"
#include "support/background_stoke.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path corpus_prefix(const std::string& name, size_t n) {
  const fs::path path = test::scratch_dir("cli-lock-input-" + name) / "texts.jsonl";
  std::ifstream in(test::fixture("corpus/fortunes-multilingual.jsonl"));
  std::ofstream out(path);
  std::string line;
  for (size_t i = 0; i < n && std::getline(in, line); ++i) out << line << '\n';
  return path;
}

std::string embed_args(const fs::path& input, const fs::path& out) {
  return "embed --model " + test::fixture("models/tiny-bert").string() + " --input " + input.string() +
         " --output " + out.string() + " --quiet --shard-size 40 --sort-window 96 --batch-tokens 2048";
}

using test::spawn_stoke;
using test::wait_exit;
using test::wait_stopped;

std::set<std::string> temp_files(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (is_temp_name(e.path())) out.insert(e.path().filename().string());
  return out;
}

std::string listing(const fs::path& dir) {
  std::string out;
  for (const auto& e : fs::directory_iterator(dir)) out += e.path().filename().string() + " ";
  return out;
}

size_t manifest_rows(const fs::path& dir) {
  return json::parse(read_file(dir / "manifest.json"))["counts"]["texts"].get<size_t>();
}

// `stoke verify` passes on the folder and its manifest counts `rows` texts.
void expect_verified(const fs::path& out, size_t rows) {
  const auto verify = test::run_stoke("verify " + out.string());
  EXPECT_EQ(verify.status, 0) << verify.out << verify.err;
  EXPECT_EQ(manifest_rows(out), rows);
}

TEST(EmbedLock, TwoRunsStartedTogetherOneWinsAndTheFolderVerifies) {
  const fs::path input = corpus_prefix("together", 1500);
  const fs::path root = test::scratch_dir("cli-lock-together"), out = root / "out";
  const pid_t a = spawn_stoke(embed_args(input, out), root / "a.err");
  const pid_t b = spawn_stoke(embed_args(input, out), root / "b.err");
  const int status_a = wait_exit(a), status_b = wait_exit(b);
  const std::string err_a = read_file(root / "a.err"), err_b = read_file(root / "b.err");
  ASSERT_EQ((status_a == 0) + (status_b == 0), 1) << "a: " << status_a << " " << err_a << "\nb: " << status_b << " "
                                                   << err_b;
  const bool a_won = status_a == 0;
  const std::string& loser_err = a_won ? err_b : err_a;
  EXPECT_EQ(a_won ? status_b : status_a, 1);
  EXPECT_NE(loser_err.find("is in use by stoke embed, pid " + std::to_string(a_won ? a : b)), std::string::npos)
      << loser_err;
  expect_verified(out, 1500);
  EXPECT_FALSE(fs::exists(out / kFolderLockName));  // released at the end of the run
}

TEST(EmbedLock, ResumeOfALiveRunFailsAtOnceAndTheRunCompletes) {
  const fs::path input = corpus_prefix("live", 300);
  const fs::path root = test::scratch_dir("cli-lock-live"), out = root / "out";
  // The first run stops itself with shard 1's files written under temp names.
  const pid_t first = spawn_stoke(embed_args(input, out), root / "first.err", {"STOKE_STOP_AT=shard-written:2"});
  ASSERT_TRUE(wait_stopped(first)) << read_file(root / "first.err");
  const std::set<std::string> temps = temp_files(out);
  ASSERT_FALSE(temps.empty()) << listing(out);
  const auto resume = test::run_stoke(embed_args(input, out) + " --resume");
  EXPECT_EQ(resume.status, 1) << resume.err;
  EXPECT_NE(resume.err.find("is in use by stoke embed, pid " + std::to_string(first)), std::string::npos) << resume.err;
  EXPECT_EQ(temp_files(out), temps);  // the live run's files untouched
  const auto overwrite = test::run_stoke(embed_args(input, out) + " --overwrite");
  EXPECT_EQ(overwrite.status, 1) << overwrite.err;
  ::kill(first, SIGCONT);
  EXPECT_EQ(wait_exit(first), 0) << read_file(root / "first.err");
  expect_verified(out, 300);
}

TEST(EmbedLock, AKilledHolderReleasesTheFolder) {
  const fs::path input = corpus_prefix("killed", 300);
  const fs::path root = test::scratch_dir("cli-lock-killed"), out = root / "out";
  const pid_t first = spawn_stoke(embed_args(input, out), root / "first.err", {"STOKE_STOP_AT=shard-written:2"});
  ASSERT_TRUE(wait_stopped(first)) << read_file(root / "first.err");
  ::kill(first, SIGKILL);
  EXPECT_EQ(wait_exit(first), 128 + SIGKILL);
  EXPECT_TRUE(fs::exists(out / kFolderLockName));  // left behind, but no longer locked
  const auto resume = test::run_stoke(embed_args(input, out) + " --resume");
  EXPECT_EQ(resume.status, 0) << resume.err;
  expect_verified(out, 300);
}

TEST(EmbedLock, TheLockFileIsNotOutput) {
  const fs::path input = corpus_prefix("not-output", 50);
  const fs::path root = test::scratch_dir("cli-lock-not-output"), out = root / "out";
  fs::create_directories(out);
  // A lock file a killed holder left (its pid long gone): not "output".
  std::ofstream(out / kFolderLockName) << R"({"job":"embed","pid":999999999,"host":"h"})" << "\n";
  const auto r = test::run_stoke(embed_args(input, out));
  ASSERT_EQ(r.status, 0) << r.err;
  std::ofstream(out / kFolderLockName) << R"({"job":"embed","pid":999999999,"host":"h"})" << "\n";
  const auto verify = test::run_stoke("verify " + out.string());
  EXPECT_EQ(verify.status, 0) << verify.out << verify.err;
  EXPECT_EQ(test::run_stoke(embed_args(input, out) + " --overwrite").status, 0);
}

TEST(EmbedOverwrite, RemovesOnlyWhatTheManifestNames) {
  const fs::path input = corpus_prefix("overwrite", 100);
  const fs::path root = test::scratch_dir("cli-overwrite"), out = root / "out";
  ASSERT_EQ(test::run_stoke(embed_args(input, out)).status, 0);
  const std::string manifest = read_file(out / "manifest.json");
  std::ofstream(out / "mine.npy") << "the user's own array";
  auto r = test::run_stoke(embed_args(input, out) + " --overwrite");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("mine.npy"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(out / "mine.npy"), "the user's own array");
  EXPECT_EQ(read_file(out / "manifest.json"), manifest);  // nothing removed before the refusal
  fs::rename(out / "mine.npy", root / "mine.npy");
  std::ofstream(out / "notes.txt") << "notes";
  r = test::run_stoke(embed_args(input, out) + " --overwrite");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("notes.txt"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(out / "notes.txt"));
  fs::remove(out / "notes.txt");

  // Stoke's own leftovers go: temp files and the shard pair a kill caught
  // between its rename and the manifest.
  std::ofstream(out / "embeddings-00001.npy.stoke-tmp-1-0") << "partial";
  fs::copy_file(out / "embeddings-00000.npy", out / "embeddings-00003.npy");
  r = test::run_stoke(embed_args(input, out) + " --overwrite");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(temp_files(out).empty());
  const auto verify = test::run_stoke("verify " + out.string());
  EXPECT_EQ(verify.status, 0) << verify.out << verify.err;
}

TEST(EmbedOverwrite, WithoutAManifestOnlyStokeTempFilesGo) {
  const fs::path input = corpus_prefix("no-manifest", 20);
  const fs::path root = test::scratch_dir("cli-overwrite-nomanifest"), out = root / "out";
  fs::create_directories(out);
  std::ofstream(out / "vectors.npy") << "the user's own array";
  std::ofstream(out / "x.npy.stoke-tmp-7-0") << "partial";
  auto r = test::run_stoke(embed_args(input, out));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("already holds output"), std::string::npos) << r.err;
  r = test::run_stoke(embed_args(input, out) + " --overwrite");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("vectors.npy"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(out / "vectors.npy"), "the user's own array");
  fs::remove(out / "vectors.npy");
  r = test::run_stoke(embed_args(input, out) + " --overwrite");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(fs::exists(out / "x.npy.stoke-tmp-7-0"));
}

}  // namespace
}  // namespace stoke
