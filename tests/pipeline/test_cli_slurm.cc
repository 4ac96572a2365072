// The Slurm test (issue 21) under ctest: scripts/slurm/test-array.sh starts a
// real single-node slurmctld/slurmd from Debian's packages and submits the
// documented array and verify jobs (docs/scale-out.md), once plainly and once
// with a task requeued mid-run. Skipped where Slurm or munge is not installed.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/file_util.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

TEST(SlurmArray, DocumentedArrayVerifiesEqualsOneProcessAndSurvivesARequeue) {
  const std::string script = std::string(STOKE_SOURCE_DIR) + "/scripts/slurm/test-array.sh";
  const test::RunResult r =
      test::run_command(script + " " + test::stoke_binary().string() + " " +
                        test::fixture("models/tiny-bert").string() + " " +
                        test::fixture("corpus/fortunes-multilingual.jsonl").string());
  if (r.status == 77) GTEST_SKIP() << r.out;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("test-array: passed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("8000 rows equal to the single-process run"), std::string::npos) << r.out;
}

// The documented array script run outside an array, or without the job's
// settings, stops naming the variable that is missing (no cluster needed).
TEST(SlurmArray, TheScriptNamesAMissingVariable) {
  const std::string script = std::string(STOKE_SOURCE_DIR) + "/scripts/slurm/embed-array.sbatch";
  const std::string clean = "env -u SLURM_ARRAY_TASK_ID -u SLURM_ARRAY_TASK_COUNT -u STOKE_NUM_TASKS -u STOKE_MODEL "
                            "-u STOKE_INPUT -u STOKE_OUT ";
  test::RunResult r = test::run_command(clean + "bash " + script);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("SLURM_ARRAY_TASK_ID: is not set: submit this script as a job array"), std::string::npos)
      << r.err;
  r = test::run_command(clean + "SLURM_ARRAY_TASK_ID=0 bash " + script);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("SLURM_ARRAY_TASK_COUNT: is not set"), std::string::npos) << r.err;
  r = test::run_command(clean + "SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=4 STOKE=false bash " + script);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("STOKE_MODEL: is not set: the model folder"), std::string::npos) << r.err;
  r = test::run_command("env -u STOKE_OUT bash " + std::string(STOKE_SOURCE_DIR) + "/scripts/slurm/verify.sbatch");
  EXPECT_NE(r.err.find("STOKE_OUT: is not set"), std::string::npos) << r.err;
}

// --shard-index auto --num-shards auto, through the CLI: the task from a Slurm
// array's variables (ids need not start at 0), recorded in the manifest; a
// missing variable named; never implicit.
TEST(EmbedTasksAuto, FromSlurmVariablesIntoTheManifest) {
  const std::filesystem::path dir = test::scratch_dir("cli-slurm-auto");
  {
    std::ofstream in(dir / "texts.jsonl");
    for (int i = 0; i < 30; ++i) in << "{\"text\": \"text number " << i << "\"}\n";
  }
  const std::string base = "embed --model " + test::fixture("models/tiny-bert").string() + " --input " +
                           (dir / "texts.jsonl").string() + " --quiet --output ";
  const std::string array = "SLURM_JOB_ID=9 SLURM_ARRAY_TASK_ID=6 SLURM_ARRAY_TASK_MIN=5 SLURM_ARRAY_TASK_MAX=7 "
                            "SLURM_ARRAY_TASK_COUNT=3 SLURM_ARRAY_TASK_STEP=1";
  test::RunResult r = test::run_stoke(base + (dir / "t1").string() + " --shard-index auto --num-shards auto",
                                      "/dev/null", array);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto m = nlohmann::json::parse(read_file(dir / "t1" / "manifest.json"));
  EXPECT_EQ(m["task"]["index"], 1);
  EXPECT_EQ(m["task"]["count"], 3);
  EXPECT_EQ(m["task"]["source"], "slurm");
  EXPECT_EQ(m["counts"]["texts"], 10);

  // Inside an array, without auto: the whole input (never split implicitly).
  r = test::run_stoke(base + (dir / "whole").string(), "/dev/null", array);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto w = nlohmann::json::parse(read_file(dir / "whole" / "manifest.json"));
  EXPECT_EQ(w["task"]["count"], 1);
  EXPECT_EQ(w["task"]["source"], "flags");
  EXPECT_EQ(w["counts"]["texts"], 30);

  r = test::run_stoke(base + (dir / "t2").string() + " --shard-index auto --num-shards auto", "/dev/null",
                      "SLURM_JOB_ID=9 SLURM_ARRAY_TASK_ID=6 SLURM_ARRAY_TASK_MIN=5");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("SLURM_ARRAY_TASK_COUNT is not set"), std::string::npos) << r.err;
  r = test::run_stoke(base + (dir / "t3").string() + " --shard-index auto --num-shards 3", "/dev/null", array);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--shard-index auto needs --num-shards auto"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace stoke
