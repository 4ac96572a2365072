// Stopping and resuming `stoke embed` as a user or a scheduler does it,
// against the real binary (issue: a user's first hour): SIGTERM or SIGINT
// stops the run, keeps every finished batch and prints what is kept and the
// command that goes on; `--output DIR --resume` alone continues with the
// manifest's settings; a second signal exits at once; a kill -9 loses at most
// the batches in flight, whatever --sort-window is. Every resumed folder is
// byte-identical to an uninterrupted run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/file_util.h"
#include "support/background_stoke.h"
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

std::string model() { return test::fixture("models/tiny-bert").string(); }

using test::expect_same_output_files;

json manifest(const fs::path& dir) { return json::parse(read_file(dir / "manifest.json")); }

// The rows a stop said it kept ("stopped: N rows kept ...").
uint64_t rows_kept(const std::string& err) {
  std::smatch m;
  if (!std::regex_search(err, m, std::regex(R"(stopped: (\d+) rows kept)"))) return ~0ull;
  return std::stoull(m[1].str());
}

// A run: the settings, its reference folder (uninterrupted), its texts.
struct Case {
  std::string name;
  size_t texts;
  std::string settings;  // flags beyond --model/--input/--output
};

const Case kMultiWindow{"multi", 600, "--shard-size 40 --sort-window 96 --batch-tokens 2048 --max-batch-size 16"};
// One window (the default --sort-window 65536) and one shard: nothing is
// committed until the end, so only the kept batches survive a stop.
const Case kOneWindow{"one", 3000, "--batch-tokens 2048 --max-batch-size 16"};

class EmbedStop : public ::testing::Test {
 protected:
  // Made once per case (scratch_dir empties a folder each time it is named).
  static fs::path input(const Case& c) {
    static std::map<std::string, fs::path> made;
    if (!made.count(c.name)) made[c.name] = test::fortunes_prefix("cli-stop-input-" + c.name, c.texts);
    return made[c.name];
  }
  static std::string args(const Case& c, const fs::path& out, const std::string& extra = "") {
    return "embed --model " + model() + " --input " + input(c).string() + " --output " + out.string() + " " +
           c.settings + " " + extra;
  }
  static fs::path reference(const Case& c) {
    static std::map<std::string, fs::path> made;
    if (!made.count(c.name)) {
      made[c.name] = test::scratch_dir("cli-stop-reference-" + c.name);
      EXPECT_EQ(run(args(c, made[c.name], "--quiet")), 0);
    }
    return made[c.name];
  }
};

// SIGTERM while the process is held at a point of the run (STOKE_STOP_AT
// stops it there; the signal waits until SIGCONT): status 143, the line, and
// a resume with only --output and --resume that gives the reference's files
// and computes no more than the batches that were in flight.
TEST_F(EmbedStop, SigtermKeepsFinishedBatchesAndResumesIdentically) {
  for (const Case& c : {kMultiWindow, kOneWindow}) {
    const fs::path ref = reference(c);
    for (const char* point : {"journal-appended:1", "journal-appended:7", "journal-appended:25", "shard-written:2"}) {
      if (c.name == "one" && std::string(point).starts_with("shard-written")) continue;  // one shard, at the end
      const std::string where = c.name + " at " + point;
      const fs::path out = test::scratch_dir("cli-stop-term-" + c.name + "-" + std::to_string(std::hash<std::string>{}(point)));
      const fs::path err_file = out.string() + ".err";
      const pid_t pid = test::spawn_stoke(args(c, out, "--quiet"), err_file, {std::string("STOKE_STOP_AT=") + point});
      ASSERT_TRUE(test::wait_stopped(pid)) << where;
      ::kill(pid, SIGTERM);
      ::kill(pid, SIGCONT);
      EXPECT_EQ(test::wait_exit(pid), 128 + SIGTERM) << where;
      const std::string err = read_file(err_file);
      EXPECT_NE(err.find("stoke: stopping: finishing the batches in flight"), std::string::npos) << where << err;
      EXPECT_NE(err.find("go on with: stoke embed --output " + out.string() + " --resume"), std::string::npos)
          << where << err;
      const uint64_t kept = rows_kept(err);
      ASSERT_NE(kept, ~0ull) << where << err;

      std::string resume_err;
      ASSERT_EQ(run("embed --output " + out.string() + " --resume --quiet", &resume_err), 0) << where << resume_err;
      expect_same_output_files(ref, out);
      const json m = manifest(out);
      EXPECT_TRUE(m["complete"].get<bool>()) << where;
      // What the resume computed: the rows not kept, plus at most the batches
      // that were in flight when the stop came (3 slots of 16 texts).
      const uint64_t computed = m["run"]["device_texts"].get<uint64_t>();
      EXPECT_LE(computed, c.texts - kept + 3 * 16) << where;
      EXPECT_GE(computed + kept, c.texts) << where;
      for (const auto& e : fs::directory_iterator(out))
        EXPECT_FALSE(e.path().filename().string().starts_with("partial-")) << where << ": " << e.path();
    }
  }
}

// A second SIGINT while the first stop is under way exits at once (130): the
// process is held where the stop is first seen, signalled again, let go. The
// folder is as a kill leaves it and resumes to the reference's files.
TEST_F(EmbedStop, SecondSignalDuringTheStopSaysSoAndExits) {
  const fs::path out = test::scratch_dir("cli-stop-second");
  const fs::path err_file = out.string() + ".err";
  const pid_t pid = test::spawn_stoke(args(kOneWindow, out, "--quiet"), err_file, {"STOKE_STOP_AT=stopping:1"});
  // Running: the first batches are kept. Then the first signal; the process
  // holds itself where the stop is first seen.
  for (int i = 0; i < 2000 && !fs::exists(out / "partial-000000000000.rows"); ++i) ::usleep(1000);
  ::kill(pid, SIGINT);
  ASSERT_TRUE(test::wait_stopped(pid));
  ::kill(pid, SIGINT);
  ::kill(pid, SIGCONT);
  EXPECT_EQ(test::wait_exit(pid), 128 + SIGINT);
  const std::string err = read_file(err_file);
  EXPECT_NE(err.find("stoke: second signal: exiting now"), std::string::npos) << err;
  std::string resume_err;
  ASSERT_EQ(run("embed --output " + out.string() + " --resume --quiet", &resume_err), 0) << resume_err;
  expect_same_output_files(reference(kOneWindow), out);
}

// kill -9 at half of one window: the resume computes the other half and at
// most the batches that were in flight (3 of 16 texts: 1.6% of 3,000).
TEST_F(EmbedStop, KillNineAtHalfAWindowLosesLessThanTwoPercent) {
  const fs::path ref = reference(kOneWindow);
  const fs::path out = test::scratch_dir("cli-stop-kill9");
  // ~190 batches of 16: the 95th kept batch is half the window.
  EXPECT_EQ(run(args(kOneWindow, out, "--quiet"), nullptr, "STOKE_CRASH_AT=journal-appended:95"), 128 + SIGKILL);
  std::string err;
  ASSERT_EQ(run("embed --output " + out.string() + " --resume", &err), 0) << err;
  expect_same_output_files(ref, out);
  const json m = manifest(out);
  const uint64_t computed = m["run"]["device_texts"].get<uint64_t>();
  const uint64_t taken = m["run"]["kept_rows_taken"].get<uint64_t>();
  EXPECT_EQ(taken, 95u * 16u);  // every batch kept before the kill (the longest batches come first, all full)
  // The resume computes exactly what no file kept; of that, the killed run
  // had computed at most its batches in flight (3 slots of 16): the work lost.
  EXPECT_EQ(computed + taken, 3000u);
  const double lost_at_most = 3.0 * 16.0;
  EXPECT_LT(lost_at_most / 3000.0, 0.02);
  EXPECT_LE(computed, 3000u - 95u * 16u);
  EXPECT_NE(err.find("resuming with 1520 rows of finished batches"), std::string::npos) << err;
}

// The manifest's settings are the resumed run's; flags given must match, and
// a refusal names every setting that differs.
TEST_F(EmbedStop, ResumeRefusalListsEveryDifference) {
  const fs::path out = test::scratch_dir("cli-stop-refuse");
  EXPECT_EQ(run(args(kMultiWindow, out, "--quiet"), nullptr, "STOKE_CRASH_AT=shard-written:3"), 128 + SIGKILL);
  std::string err;
  EXPECT_EQ(run("embed --output " + out.string() + " --resume --sort-window 64 --shard-size 50 --quiet", &err), 1);
  EXPECT_NE(err.find("2 settings differ from the output's: settings/sort_window differs (the output has 96, this "
                     "run has 64); settings/shard_size differs (the output has 40, this run has 50)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("give only --output and --resume"), std::string::npos) << err;
  // Without --resume: the folder says it holds an unfinished run, and how to go on.
  EXPECT_EQ(run(args(kMultiWindow, out, "--quiet"), &err), 1);
  EXPECT_NE(err.find("holds an unfinished run (80 rows committed): go on with `stoke embed --output " + out.string() +
                     " --resume`"),
            std::string::npos)
      << err;
  ASSERT_EQ(run("embed --output " + out.string() + " --resume --quiet", &err), 0) << err;
  expect_same_output_files(reference(kMultiWindow), out);
}

// The piped progress ends on a 100% line counting every row, a resumed run's
// too, and the summary's texts/s is the manifest's.
TEST_F(EmbedStop, ProgressReachesAllRowsAndFiguresAgree) {
  const fs::path out = test::scratch_dir("cli-stop-progress");
  EXPECT_EQ(run(args(kMultiWindow, out, "--quiet"), nullptr, "STOKE_CRASH_AT=shard-written:6"), 128 + SIGKILL);
  std::string err;
  ASSERT_EQ(run("embed --output " + out.string() + " --resume", &err), 0) << err;
  std::smatch last;
  std::string rest = err;
  std::string final_line;
  for (std::smatch m; std::regex_search(rest, m, std::regex(R"(embed \[[#.]+\]\s+[0-9.]+%\s+\d+ records)"));
       rest = m.suffix())
    final_line = m.str();
  EXPECT_NE(final_line.find("100.0%  600 records"), std::string::npos) << err;
  std::smatch rate;
  ASSERT_TRUE(std::regex_search(err, rate, std::regex(R"(embedded (\d+) texts .*?: (\d+) texts/s)"))) << err;
  const json m = manifest(out);
  EXPECT_NEAR(std::stod(rate[2].str()), m["run"]["texts_per_second"].get<double>(), 1.0);
  EXPECT_LT(m["run"]["texts_per_second"].get<double>(), m["run"]["pipeline_texts_per_second"].get<double>());
}

// doctor's texts/s is the pipeline's figure of the same run (docs/output-format.md
// "Figures"), and its piped progress ends at 100% when it profiles a whole run.
TEST_F(EmbedStop, DoctorFiguresAreThePipelinesOfTheSameRun) {
  const fs::path out = test::scratch_dir("cli-stop-doctor-figures");
  const test::RunResult r = test::run_stoke("doctor " + args(kMultiWindow, out));
  ASSERT_EQ(r.status, 0) << r.err;
  std::smatch rate;
  ASSERT_TRUE(std::regex_search(r.out, rate, std::regex(R"(busy \d+% of [0-9.]+ s \((\d+) texts/s)"))) << r.out;
  const json m = manifest(out);
  const double pipeline = m["run"]["pipeline_texts_per_second"].get<double>();
  EXPECT_NEAR(std::stod(rate[1].str()), pipeline, 1.0 + 1e-3 * pipeline) << r.out;
  EXPECT_NE(r.err.find("100.0%  600 records"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace stoke
