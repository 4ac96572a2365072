// SIGTERM on the other jobs that write (core/stop_request.h), against the
// real binary: train saves the step it finished and resumes to the bitwise
// result of an uninterrupted run; classify keeps the lines of a prefix of the
// input and says where to go on; doctor diagnoses as far as the run went; a
// stop that takes longer than --stop-timeout ends the process anyway. Every
// stopped job exits 128 + the signal. (embed: test_cli_embed_stop.cc.)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
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

std::string model() { return test::fixture("models/tiny-bert").string(); }

fs::path labelled(const std::string& name, size_t n) { return test::language_labelled("cli-stop-jobs-data-" + name, n); }

// Starts `args`, holds it at `point` (STOKE_STOP_AT), sends SIGTERM, lets it
// go; its exit status and stderr.
std::pair<int, std::string> term_at(const std::string& args, const std::string& point, const fs::path& err_file,
                                    const std::vector<std::string>& env = {}) {
  std::vector<std::string> e = env;
  e.push_back("STOKE_STOP_AT=" + point);
  const pid_t pid = test::spawn_stoke(args, err_file, e);
  if (!test::wait_stopped(pid)) return {test::wait_exit(pid), read_file(err_file)};
  ::kill(pid, SIGTERM);
  ::kill(pid, SIGCONT);
  const int status = test::wait_exit(pid);
  return {status, read_file(err_file)};
}

TEST(StopJobs, TrainSavesTheFinishedStepAndResumesBitwise) {
  const fs::path data = labelled("train", 72);
  const fs::path root = test::scratch_dir("cli-stop-train");
  const std::string base = "train --model " + model() + " --train " + data.string() +
                           " --batch-size 8 --max-steps 12 --save-every 100 --log-every 4 --dropout 0.1 --quiet";
  const std::string env = "OMP_NUM_THREADS=1";
  const auto straight = test::run_stoke(base + " --output " + (root / "straight").string(), "/dev/null", env);
  ASSERT_EQ(straight.status, 0) << straight.err;

  const fs::path out = root / "stopped";
  // Held as step 6 begins: the signal comes while it runs; step 6 finishes and is saved.
  const auto [status, err] = term_at(base + " --output " + out.string(), "train_step:6", root / "stopped.err", {env});
  EXPECT_EQ(status, 128 + SIGTERM) << err;
  EXPECT_NE(err.find("stoke: stopped at step 6 of 12: checkpoint-6 is saved in " + out.string() +
                     " (no final model yet); go on with: stoke " + base + " --output " + out.string() + " --resume"),
            std::string::npos)
      << err;
  EXPECT_TRUE(fs::exists(out / "checkpoint-6"));
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));
  const auto resumed = test::run_stoke(base + " --output " + out.string() + " --resume", "/dev/null", env);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(read_file(out / "model.safetensors"), read_file(root / "straight" / "model.safetensors"));
}

// classify writes whole windows of 65536 records in input order and has no
// resume: a stop within the first window leaves a valid, empty output and says so.
TEST(StopJobs, ClassifyStopsCleanlyAndSaysWhatItKept) {
  const fs::path data = labelled("classify", 600);
  const fs::path root = test::scratch_dir("cli-stop-classify");
  const fs::path out = root / "labels.jsonl";
  const std::string args = "classify --model " + model() + " --input " + data.string() + " --output " + out.string() +
                           " --max-batch-size 8 --batch-tokens 1024 --quiet";
  const auto [status, err] = term_at(args, "batch-collected:3", root / "classify.err");
  EXPECT_EQ(status, 128 + SIGTERM) << err;
  EXPECT_NE(err.find("stopped before the first window of 65536 records was done (rows are written a whole window at "
                     "a time, in input order): " +
                     out.string() + " holds no lines; classify has no resume: run it again"),
            std::string::npos)
      << err;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_EQ(fs::file_size(out), 0u);
}

TEST(StopJobs, DoctorDiagnosesAsFarAsTheRunWent) {
  const fs::path data = labelled("doctor", 600);
  const fs::path root = test::scratch_dir("cli-stop-doctor");
  const std::string args = "doctor embed --model " + model() + " --input " + data.string() +
                           " --max-batch-size 8 --batch-tokens 1024 --sort-window 64 --quiet";
  const auto [status, err] = term_at(args, "batch-collected:4", root / "doctor.err");
  EXPECT_EQ(status, 128 + SIGTERM) << err;
  EXPECT_NE(err.find("stoke: stopping: finishing the batches in flight"), std::string::npos) << err;
}

// A stop that does not end within --stop-timeout (here: the thread that sees
// it first hangs, as a stuck device call would): the watchdog ends the
// process, saying so, 143; the folder resumes as after a kill.
TEST(StopJobs, StopTimeoutEndsAStopThatHangs) {
  const fs::path data = labelled("timeout", 300);
  const fs::path root = test::scratch_dir("cli-stop-timeout");
  const fs::path out = root / "out";
  const std::string args = "embed --model " + model() + " --input " + data.string() + " --output " + out.string() +
                           " --max-batch-size 8 --stop-timeout 0.5 --quiet";
  const auto [status, err] = term_at(args, "batch-collected:3", root / "timeout.err", {"STOKE_HANG_AT=stopping:1"});
  EXPECT_EQ(status, 128 + SIGTERM) << err;
  EXPECT_NE(err.find("stoke: did not stop within --stop-timeout 0.5 s: exiting now"), std::string::npos) << err;
  const auto resumed = test::run_stoke("embed --output " + out.string() + " --resume --quiet");
  EXPECT_EQ(resumed.status, 0) << resumed.err;
}

}  // namespace
}  // namespace stoke
