// `--shard-index auto --num-shards auto`: the task index and count from the
// scheduler's environment instead of flags (docs/scale-out.md). Opt-in only —
// a job that merely runs inside an array never splits its input by itself.
//
//   Kubernetes indexed Job:  index = JOB_COMPLETION_INDEX, count = STOKE_NUM_TASKS
//                            (a pod cannot see its Job's spec.completions, so the
//                            manifest sets STOKE_NUM_TASKS to the same number)
//   Slurm job array:         index = SLURM_ARRAY_TASK_ID − SLURM_ARRAY_TASK_MIN,
//                            count = SLURM_ARRAY_TASK_COUNT; ids need not start
//                            at 0, but must be one dense range (step 1)
//
// Every refusal names the variable that is missing or wrong.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace stoke {

struct TaskAssignment {
  uint64_t index = 0, count = 1;
  std::string source = "flags";  // "flags", "slurm" or "kubernetes" (the manifest's task.source)
  std::string detail;            // the variables read, e.g. "SLURM_ARRAY_TASK_ID=7 − SLURM_ARRAY_TASK_MIN=4, ..."
};

// Looks a variable up; nullptr when unset. Tests pass a map, the job ::getenv.
using EnvLookup = std::function<const char*(const char*)>;

// The task from the environment, or Error(invalid_argument) naming the
// variable that is missing or wrong. max_count bounds the count (as
// --num-shards is bounded).
TaskAssignment task_from_environment(const EnvLookup& env, uint64_t max_count);

}  // namespace stoke
