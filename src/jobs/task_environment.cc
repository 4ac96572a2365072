#include "jobs/task_environment.h"

#include <charconv>
#include <optional>

#include "core/error.h"

namespace stoke {

namespace {

constexpr const char* kAutoFlags = "--shard-index auto --num-shards auto";

[[noreturn]] void refuse(const std::string& why) { throw Error(Errc::invalid_argument, std::string(kAutoFlags) + ": " + why); }

// A variable's value as a whole number >= 0; unset -> nullopt; anything else is refused naming it.
std::optional<uint64_t> number(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (!v) return std::nullopt;
  const std::string text(v);
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    refuse(std::string(name) + "=\"" + text + "\": expected a whole number >= 0");
  return n;
}

uint64_t required(const EnvLookup& env, const char* name, const std::string& why) {
  const std::optional<uint64_t> n = number(env, name);
  if (!n) refuse(std::string(name) + " is not set (" + why + ")");
  return *n;
}

std::string var(const char* name, uint64_t value) { return std::string(name) + "=" + std::to_string(value); }

void check_count(uint64_t count, const char* name, uint64_t max_count) {
  if (count < 1 || count > max_count)
    refuse(var(name, count) + ": expected 1 to " + std::to_string(max_count) + " tasks");
}

TaskAssignment from_kubernetes(const EnvLookup& env, uint64_t max_count) {
  TaskAssignment t;
  t.source = "kubernetes";
  t.index = required(env, "JOB_COMPLETION_INDEX", "set by an indexed Job");
  t.count = required(env, "STOKE_NUM_TASKS",
                     "a pod cannot see its Job's completions: set STOKE_NUM_TASKS in the pod's env to the Job's "
                     "spec.completions");
  check_count(t.count, "STOKE_NUM_TASKS", max_count);
  if (t.index >= t.count)
    refuse(var("JOB_COMPLETION_INDEX", t.index) + " is not below " + var("STOKE_NUM_TASKS", t.count) +
           ": keep STOKE_NUM_TASKS equal to the Job's completions");
  t.detail = var("JOB_COMPLETION_INDEX", t.index) + ", " + var("STOKE_NUM_TASKS", t.count);
  return t;
}

TaskAssignment from_slurm(const EnvLookup& env, uint64_t max_count) {
  TaskAssignment t;
  t.source = "slurm";
  const char* why = "set by Slurm in every task of a job array";
  const uint64_t id = required(env, "SLURM_ARRAY_TASK_ID", why);
  const uint64_t min = required(env, "SLURM_ARRAY_TASK_MIN", why);
  t.count = required(env, "SLURM_ARRAY_TASK_COUNT", why);
  check_count(t.count, "SLURM_ARRAY_TASK_COUNT", max_count);
  // --array=0-15:4 runs ids 0, 4, 8, 12: id − min would not number the tasks 0..N-1.
  if (const std::optional<uint64_t> step = number(env, "SLURM_ARRAY_TASK_STEP"); step && *step != 1)
    refuse(var("SLURM_ARRAY_TASK_STEP", *step) + ": expected 1 (an array with a step, e.g. --array=0-15:4, does not "
                                                 "number its tasks 0..N-1; use --array=0-3, or give --shard-index "
                                                 "and --num-shards)");
  // --array=0,2,5 has no step but gaps: max − min + 1 is then more than the count.
  if (const std::optional<uint64_t> max = number(env, "SLURM_ARRAY_TASK_MAX");
      max && (*max < min || *max - min + 1 != t.count))
    refuse(var("SLURM_ARRAY_TASK_MIN", min) + " to " + var("SLURM_ARRAY_TASK_MAX", *max) + " is not " +
           var("SLURM_ARRAY_TASK_COUNT", t.count) +
           " ids in a row: the array has gaps (e.g. --array=0,2,5, or only some indexes resubmitted); give "
           "--shard-index and --num-shards");
  if (id < min || id - min >= t.count)
    refuse(var("SLURM_ARRAY_TASK_ID", id) + " is not within " + var("SLURM_ARRAY_TASK_MIN", min) + " and " +
           var("SLURM_ARRAY_TASK_COUNT", t.count));
  t.index = id - min;
  t.detail = var("SLURM_ARRAY_TASK_ID", id) + " − " + var("SLURM_ARRAY_TASK_MIN", min) + ", " +
             var("SLURM_ARRAY_TASK_COUNT", t.count);
  return t;
}

}  // namespace

TaskAssignment task_from_environment(const EnvLookup& env, uint64_t max_count) {
  const bool kubernetes = env("JOB_COMPLETION_INDEX") != nullptr;
  const bool slurm = env("SLURM_ARRAY_TASK_ID") != nullptr;
  if (kubernetes && slurm)
    refuse("both JOB_COMPLETION_INDEX (Kubernetes) and SLURM_ARRAY_TASK_ID (Slurm) are set; unset the one that does "
           "not apply, or give --shard-index and --num-shards");
  if (kubernetes) return from_kubernetes(env, max_count);
  if (slurm) return from_slurm(env, max_count);
  if (env("SLURM_JOB_ID"))
    refuse("SLURM_ARRAY_TASK_ID is not set: this Slurm job is not an array task (submit with sbatch --array=0-N), "
           "or give --shard-index and --num-shards");
  refuse("no task in the environment: expected SLURM_ARRAY_TASK_ID (a Slurm job array) or JOB_COMPLETION_INDEX "
         "(a Kubernetes indexed Job)");
}

}  // namespace stoke
