// Crash safety and resume of `stoke embed`, against the real binary
// (RELIABILITY items 5-8): a job killed with SIGKILL at random moments, and at
// every step of the commit protocol, resumes to files byte-identical to an
// uninterrupted run; a resume that would mix vector spaces or change the
// batches is refused naming the field; bad records stop or are skipped into
// errors.jsonl; tasks of a split cover the input exactly once.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "core/file_util.h"
#include "support/corpus_files.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Runs stoke with args (a shell command line tail); returns the exit status.
int run(const std::string& args, std::string* err = nullptr, const std::string& env = "") {
  const test::RunResult r = test::run_stoke(args, "/dev/null", env);
  if (err) *err = r.err;
  return r.status;
}

// The first n fortunes as JSONL.
fs::path corpus_prefix(const std::string& name, size_t n) { return test::fortunes_prefix("cli-resume-input-" + name, n); }

std::string model() { return test::fixture("models/tiny-bert").string(); }

// Small shards and windows: many commits and many windows in a short run.
std::string embed_args(const fs::path& input, const fs::path& out, const std::string& extra = "") {
  std::string flags = " --quiet";
  for (const char* f : {"--shard-size 40", "--sort-window 96", "--batch-tokens 2048"})
    if (extra.find(std::string(f).substr(0, std::string(f).find(' ') + 1)) == std::string::npos)
      flags += std::string(" ") + f;  // extra replaces a default it names
  return "embed --model " + model() + " --input " + input.string() + " --output " + out.string() + flags + " " +
         extra;
}

// Every data file of an output folder (embeddings, ids, errors), the same bytes.
void expect_same_files(const fs::path& expected, const fs::path& actual) {
  test::expect_same_output_files(expected, actual);
}

json manifest(const fs::path& dir) { return json::parse(read_file(dir / "manifest.json")); }

// Every line of every ids file, in shard order (record numbers without --id-field).
std::vector<uint64_t> all_ids(const fs::path& dir) {
  std::vector<uint64_t> ids;
  const json m = manifest(dir);
  for (const auto& s : m["shards"]) {
    std::ifstream in(dir / s["ids"].get<std::string>());
    std::string line;
    while (std::getline(in, line)) ids.push_back(std::stoull(line));
  }
  return ids;
}

class EmbedResume : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    input_ = new fs::path(corpus_prefix("main", 600));
    reference_ = new fs::path(test::scratch_dir("cli-resume-reference"));
    ASSERT_EQ(run(embed_args(*input_, *reference_)), 0);
  }
  static void TearDownTestSuite() {
    delete input_;
    delete reference_;
  }
  static fs::path* input_;
  static fs::path* reference_;
};
fs::path* EmbedResume::input_ = nullptr;
fs::path* EmbedResume::reference_ = nullptr;

TEST_F(EmbedResume, ReferenceRunIsCompleteAndInOrder) {
  const json m = manifest(*reference_);
  EXPECT_TRUE(m["complete"].get<bool>());
  EXPECT_EQ(m["counts"]["texts"], 600);
  EXPECT_EQ(m["counts"]["records"], 600);
  EXPECT_EQ(m["shards"].size(), 15u);  // 600 rows / 40
  const auto ids = all_ids(*reference_);
  ASSERT_EQ(ids.size(), 600u);
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], i);
  // One host sync per batch: the result reads, nothing else.
  EXPECT_EQ(m["run"]["host_syncs"], m["run"]["batches"]);
}

TEST_F(EmbedResume, SerialRunIsByteIdentical) {
  const fs::path out = test::scratch_dir("cli-resume-serial");
  ASSERT_EQ(run(embed_args(*input_, out, "--serial")), 0);
  expect_same_files(*reference_, out);
}

TEST_F(EmbedResume, AnyWorkerCountGivesTheSameFiles) {
  for (int workers : {1, 2, 3}) {
    const fs::path out = test::scratch_dir("cli-resume-workers-" + std::to_string(workers));
    ASSERT_EQ(run(embed_args(*input_, out, "--workers " + std::to_string(workers))), 0);
    expect_same_files(*reference_, out);
  }
}

// Killed at each step of the commit protocol (and at its first and a later
// commit), then resumed: the same files as the uninterrupted run.
TEST_F(EmbedResume, CrashAtEveryCommitStepResumesIdentically) {
  for (const char* step : {"shard-written", "shard-data-renamed", "shard-ids-renamed", "before-manifest",
                           "before-rename", "after-manifest"}) {
    for (int nth : {step == std::string("shard-written") ? 1 : 5}) {
      const fs::path out = test::scratch_dir(std::string("cli-resume-crash-") + step + std::to_string(nth));
      const int status = run(embed_args(*input_, out), nullptr,
                             std::string("STOKE_CRASH_AT=") + step + ":" + std::to_string(nth));
      EXPECT_EQ(status, 128 + SIGKILL) << step << ":" << nth << " did not crash";
      std::string err;
      ASSERT_EQ(run(embed_args(*input_, out, "--resume"), &err), 0) << step << ":" << nth << ": " << err;
      expect_same_files(*reference_, out);
      for (const auto& e : fs::directory_iterator(out))
        EXPECT_EQ(e.path().filename().string().find(".stoke-tmp-"), std::string::npos) << e.path();
    }
  }
}

// kill -9 at random moments, resume each time; the end state equals the
// uninterrupted run. STOKE_KILL_TEST_KILLS raises the count for the long run.
TEST(EmbedKills, RandomKillsResumeIdentically) {
  const char* env = std::getenv("STOKE_KILL_TEST_KILLS");
  const int kills = env ? std::atoi(env) : 20;
  // 3,000 texts in shards of 40: ~75 commits, so kills land in every phase.
  const fs::path input = corpus_prefix("kills", 3000);
  const fs::path reference = test::scratch_dir("cli-resume-kills-reference");
  const fs::path out = test::scratch_dir("cli-resume-kills");
  // How long an uninterrupted run takes bounds the kill times.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(run(embed_args(input, reference)), 0);
  const double full = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::mt19937 rng(12345);
  // Up to half a run: a resumed run has less left to do, and most kills should
  // land while it works (in loading, computing, or committing).
  // The bound adapts: a run that finishes before its kill shrinks it (a
  // loaded machine makes runs slower, a resumed run has less to do).
  double bound = full * 0.5;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const std::string cmd = test::stoke_binary().string() + " " + embed_args(input, out, "--resume");
  int killed = 0, finished = 0;
  for (int attempt = 0; killed < kills && attempt < 4 * kills; ++attempt) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >/dev/null 2>&1").c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(bound * unit(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
      ++killed;
      bound *= 1.05;
    }
    if (WIFEXITED(status)) {
      bound *= 0.7;
      ASSERT_EQ(WEXITSTATUS(status), 0) << "a resumed run failed";
      // Finished before the kill: check it, then start over so later kills land mid-run.
      expect_same_files(reference, out);
      fs::remove_all(out);
      ++finished;
    }
  }
  EXPECT_EQ(killed, kills);
  RecordProperty("finished_runs", finished);
  std::string err;
  ASSERT_EQ(run(embed_args(input, out, "--resume"), &err), 0) << err;
  expect_same_files(reference, out);
}

// A write that fails (a full disk) at any commit step: exit 1 with the error,
// no temp file left, nothing half-committed; resuming once space is back gives
// the uninterrupted run's files.
TEST_F(EmbedResume, WriteFailureExitsCleanlyAndResumes) {
  for (const char* step : {"shard-written", "shard-ids-renamed", "before-manifest", "before-rename"}) {
    const fs::path out = test::scratch_dir(std::string("cli-resume-fail-") + step);
    std::string err;
    EXPECT_EQ(run(embed_args(*input_, out), &err, std::string("STOKE_FAIL_AT=") + step + ":3"), 1) << step;
    EXPECT_NE(err.find("No space left on device"), std::string::npos) << step << ": " << err;
    for (const auto& e : fs::directory_iterator(out))
      EXPECT_EQ(e.path().filename().string().find(".stoke-tmp-"), std::string::npos) << step << ": " << e.path();
    ASSERT_EQ(run(embed_args(*input_, out, "--resume"), &err), 0) << step << ": " << err;
    expect_same_files(*reference_, out);
  }
}

TEST_F(EmbedResume, CompleteOutputResumesToNothing) {
  std::string err;
  ASSERT_EQ(run(embed_args(*input_, *reference_, "--resume"), &err), 0) << err;
  EXPECT_NE(err.find("already complete"), std::string::npos) << err;
}

TEST_F(EmbedResume, ExistingOutputIsRefusedWithoutResumeOrOverwrite) {
  const fs::path out = test::scratch_dir("cli-resume-existing");
  ASSERT_EQ(run(embed_args(*input_, out)), 0);
  std::string err;
  EXPECT_EQ(run(embed_args(*input_, out), &err), 1);
  EXPECT_NE(err.find("already holds output"), std::string::npos) << err;
  EXPECT_EQ(run(embed_args(*input_, out, "--overwrite")), 0);
  expect_same_files(*reference_, out);
}

TEST_F(EmbedResume, CorruptedShardIsRedoneOnResume) {
  const fs::path out = test::scratch_dir("cli-resume-corrupt");
  ASSERT_EQ(run(embed_args(*input_, out)), 0);
  {
    std::fstream f(out / "embeddings-00003.npy", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  std::string err;
  ASSERT_EQ(run(embed_args(*input_, out, "--resume"), &err), 0) << err;
  EXPECT_NE(err.find("embeddings-00003.npy does not match its checksum"), std::string::npos) << err;
  expect_same_files(*reference_, out);
}

// An output another device kind wrote (here: a CPU run's manifest marked as
// a GPU's) is not continued: the device rounds the rows differently.
TEST_F(EmbedResume, ResumeRefusesAnotherDeviceKind) {
  EXPECT_EQ(manifest(*reference_)["device"], "cpu");
  const fs::path out = test::scratch_dir("cli-resume-device");
  fs::copy(*reference_, out, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  json m = manifest(out);
  m["device"] = "cuda";
  m["complete"] = false;
  std::ofstream(out / "manifest.json") << m.dump(2);
  std::string err;
  EXPECT_EQ(run(embed_args(*input_, out, "--resume"), &err), 1);
  EXPECT_NE(err.find("device differs (the output has \"cuda\", this run has \"cpu\")"), std::string::npos) << err;
}

// Every field that fixes the vector space or the batches is compared on resume.
TEST_F(EmbedResume, ResumeRefusesEachDifferingField) {
  const fs::path other_input = corpus_prefix("other", 599);
  const struct {
    std::string flags;
    std::string field;
  } cases[] = {
      {"--pooling cls", "pooling"},
      {"--no-normalize", "normalize"},
      {"--max-length 64", "max_length"},
      {"--dimensions 32", "dimensions"},
      {"--output-dtype f16", "output_dtype"},
      {"--prompt 'query: '", "prompt"},
      {"--batch-tokens 4096", "settings/batch_tokens"},
      {"--max-batch-size 32", "settings/max_batch_size"},
      {"--sort-window 64", "settings/sort_window"},
      {"--shard-size 50", "settings/shard_size"},
      {"--num-shards 2 --shard-index 1", "task/index"},
      {"--id-field text", "input/id_field"},
  };
  for (const auto& c : cases) {
    std::string err;
    EXPECT_EQ(run(embed_args(*input_, *reference_, "--resume " + c.flags), &err), 1) << c.flags;
    EXPECT_NE(err.find(c.field + " differs"), std::string::npos) << c.flags << ": " << err;
  }
  std::string err;
  EXPECT_EQ(run(embed_args(other_input, *reference_, "--resume"), &err), 1);
  EXPECT_NE(err.find("input/size differs"), std::string::npos) << err;
  const std::string xlmr = test::fixture("models/tiny-xlmr").string();
  EXPECT_EQ(run("embed --model " + xlmr + " --input " + input_->string() + " --output " + reference_->string() +
                    " --quiet --shard-size 40 --sort-window 96 --batch-tokens 2048 --resume",
                &err),
            1);
  EXPECT_NE(err.find("model/config_sha256 differs"), std::string::npos) << err;
  // Nothing was touched by the refusals.
  const auto ids = all_ids(*reference_);
  EXPECT_EQ(ids.size(), 600u);
}

TEST(EmbedBadRecords, StopNamesTheLineAndSkipRecordsThem) {
  const fs::path dir = test::scratch_dir("cli-resume-bad");
  const fs::path input = dir / "in.jsonl";
  {
    std::ofstream out(input);
    for (int i = 0; i < 200; ++i) {
      if (i == 37) out << "{\"text\": 5}\n";
      else if (i == 150) out << "not json\n";
      else out << "{\"text\": \"record " << i << "\"}\n";
    }
  }
  std::string err;
  EXPECT_EQ(run(embed_args(input, dir / "stop"), &err), 1);
  EXPECT_NE(err.find("in.jsonl:38"), std::string::npos) << err;
  EXPECT_NE(err.find("expected a string"), std::string::npos) << err;

  ASSERT_EQ(run(embed_args(input, dir / "skip", "--on-error skip"), &err), 0) << err;
  const json m = manifest(dir / "skip");
  EXPECT_EQ(m["counts"]["texts"], 198);
  EXPECT_EQ(m["counts"]["skipped"], 2);
  EXPECT_EQ(m["counts"]["records"], 200);
  const std::string errors = read_file(dir / "skip" / "errors.jsonl");
  std::vector<json> lines;
  std::istringstream in(errors);
  for (std::string l; std::getline(in, l);) lines.push_back(json::parse(l));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["record"], 37);
  EXPECT_EQ(lines[0]["line"], 38);
  EXPECT_EQ(lines[1]["record"], 150);
  const auto ids = all_ids(dir / "skip");
  ASSERT_EQ(ids.size(), 198u);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 37u), 0);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 150u), 0);

  // Killed after a commit, resumed: errors.jsonl holds each bad record once.
  const fs::path resumed = dir / "skip-resumed";
  EXPECT_EQ(run(embed_args(input, resumed, "--on-error skip"), nullptr, "STOKE_CRASH_AT=after-manifest:2"),
            128 + SIGKILL);
  ASSERT_EQ(run(embed_args(input, resumed, "--on-error skip --resume"), &err), 0) << err;
  expect_same_files(dir / "skip", resumed);
}

TEST(EmbedTasks, PartitionsCoverTheInputExactlyOnce) {
  const fs::path input = corpus_prefix("tasks", 500);
  const fs::path whole = test::scratch_dir("cli-resume-tasks-whole");
  ASSERT_EQ(run(embed_args(input, whole)), 0);
  const std::string whole_npy = read_file(whole / "embeddings-00000.npy");
  std::set<uint64_t> seen;
  const uint64_t N = 3;
  for (uint64_t i = 0; i < N; ++i) {
    const fs::path out = test::scratch_dir("cli-resume-task-" + std::to_string(i));
    ASSERT_EQ(run(embed_args(input, out, "--shard-index " + std::to_string(i) + " --num-shards 3")), 0);
    const json m = manifest(out);
    EXPECT_EQ(m["task"]["index"], i);
    EXPECT_EQ(m["counts"]["records"], 500);
    for (uint64_t id : all_ids(out)) {
      EXPECT_EQ(id % N, i);
      EXPECT_TRUE(seen.insert(id).second) << "record " << id << " twice";
    }
  }
  EXPECT_EQ(seen.size(), 500u);
}

}  // namespace
}  // namespace stoke
