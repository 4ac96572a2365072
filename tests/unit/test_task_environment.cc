// --shard-index auto --num-shards auto (jobs/task_environment.h): the task
// from a Slurm job array or a Kubernetes indexed Job, and a refusal naming the
// variable for every setup that would not number the tasks 0..N-1.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"
#include "jobs/task_environment.h"

namespace stoke {
namespace {

using Env = std::map<std::string, std::string>;

TaskAssignment from(const Env& env) {
  return task_from_environment(
      [&env](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      1'000'000);
}

// The message of the refusal, or "" when none.
std::string refusal(const Env& env) {
  try {
    from(env);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    return e.what();
  }
  return "";
}

TEST(TaskEnvironment, SlurmArrayFromZero) {
  const TaskAssignment t = from({{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_MIN", "0"},
                                 {"SLURM_ARRAY_TASK_MAX", "3"}, {"SLURM_ARRAY_TASK_COUNT", "4"},
                                 {"SLURM_ARRAY_TASK_STEP", "1"}, {"SLURM_JOB_ID", "17"}});
  EXPECT_EQ(t.index, 2u);
  EXPECT_EQ(t.count, 4u);
  EXPECT_EQ(t.source, "slurm");
  EXPECT_NE(t.detail.find("SLURM_ARRAY_TASK_ID=2"), std::string::npos) << t.detail;
}

TEST(TaskEnvironment, SlurmArrayNotFromZeroIsShifted) {
  // --array=5-8: ids 5..8 are tasks 0..3.
  const TaskAssignment t = from({{"SLURM_ARRAY_TASK_ID", "7"}, {"SLURM_ARRAY_TASK_MIN", "5"},
                                 {"SLURM_ARRAY_TASK_MAX", "8"}, {"SLURM_ARRAY_TASK_COUNT", "4"}});
  EXPECT_EQ(t.index, 2u);
  EXPECT_EQ(t.count, 4u);
}

TEST(TaskEnvironment, SlurmRefusalsNameTheVariable) {
  const Env full = {{"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_ARRAY_TASK_MIN", "0"}, {"SLURM_ARRAY_TASK_MAX", "12"},
                    {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_ARRAY_TASK_STEP", "4"}};
  EXPECT_NE(refusal(full).find("SLURM_ARRAY_TASK_STEP=4: expected 1"), std::string::npos) << refusal(full);
  Env gaps = full;  // --array=0,2,5
  gaps.erase("SLURM_ARRAY_TASK_STEP");
  gaps["SLURM_ARRAY_TASK_ID"] = "2";
  gaps["SLURM_ARRAY_TASK_MAX"] = "5";
  gaps["SLURM_ARRAY_TASK_COUNT"] = "3";
  EXPECT_NE(refusal(gaps).find("SLURM_ARRAY_TASK_MIN=0 to SLURM_ARRAY_TASK_MAX=5 is not SLURM_ARRAY_TASK_COUNT=3"),
            std::string::npos)
      << refusal(gaps);
  for (const char* missing : {"SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_COUNT"}) {
    Env e = {{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_MIN", "0"}, {"SLURM_ARRAY_TASK_COUNT", "4"}};
    e.erase(missing);
    EXPECT_NE(refusal(e).find(std::string(missing) + " is not set"), std::string::npos) << refusal(e);
  }
  EXPECT_NE(refusal({{"SLURM_ARRAY_TASK_ID", "x1"}, {"SLURM_ARRAY_TASK_MIN", "0"}, {"SLURM_ARRAY_TASK_COUNT", "4"}})
                .find("SLURM_ARRAY_TASK_ID=\"x1\": expected a whole number"),
            std::string::npos);
  EXPECT_NE(refusal({{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_MIN", "0"}, {"SLURM_ARRAY_TASK_COUNT", "0"}})
                .find("SLURM_ARRAY_TASK_COUNT=0: expected 1 to 1000000"),
            std::string::npos);
  // A plain (non-array) Slurm job.
  const std::string plain = refusal({{"SLURM_JOB_ID", "17"}});
  EXPECT_NE(plain.find("SLURM_ARRAY_TASK_ID is not set: this Slurm job is not an array task"), std::string::npos)
      << plain;
}

TEST(TaskEnvironment, KubernetesIndexedJob) {
  const TaskAssignment t = from({{"JOB_COMPLETION_INDEX", "5"}, {"STOKE_NUM_TASKS", "8"}});
  EXPECT_EQ(t.index, 5u);
  EXPECT_EQ(t.count, 8u);
  EXPECT_EQ(t.source, "kubernetes");
  EXPECT_NE(refusal({{"JOB_COMPLETION_INDEX", "5"}}).find("STOKE_NUM_TASKS is not set"), std::string::npos);
  EXPECT_NE(refusal({{"JOB_COMPLETION_INDEX", "8"}, {"STOKE_NUM_TASKS", "8"}})
                .find("JOB_COMPLETION_INDEX=8 is not below STOKE_NUM_TASKS=8"),
            std::string::npos);
}

TEST(TaskEnvironment, NoneOrBothAreRefused) {
  const std::string none = refusal({});
  EXPECT_NE(none.find("--shard-index auto --num-shards auto: no task in the environment: expected "
                      "SLURM_ARRAY_TASK_ID (a Slurm job array) or JOB_COMPLETION_INDEX"),
            std::string::npos)
      << none;
  const std::string both = refusal({{"JOB_COMPLETION_INDEX", "1"}, {"STOKE_NUM_TASKS", "2"},
                                    {"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_MIN", "0"},
                                    {"SLURM_ARRAY_TASK_COUNT", "2"}});
  EXPECT_NE(both.find("both JOB_COMPLETION_INDEX (Kubernetes) and SLURM_ARRAY_TASK_ID (Slurm) are set"),
            std::string::npos)
      << both;
}

}  // namespace
}  // namespace stoke
