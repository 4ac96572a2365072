// Learning-rate schedules and the batch-size scaling rule: host math, done
// once per optimizer step (the lr goes to the adamw op as a host value, so a
// schedule never needs a device read).
//
// The schedules are Hugging Face's (transformers/optimization.py), multiplier
// for multiplier: `lr_multiplier(config, k)` is their lr_lambda(k), where k is
// the number of optimizer steps already taken — LambdaLR starts at 0, so the
// first step uses lr_lambda(0), the second lr_lambda(1), and so on. With
// warmup the very first step therefore has lr 0, as in the HF Trainer.
#pragma once

#include <cstdint>
#include <string_view>

namespace stoke::train {

enum class Schedule {
  linear,    // get_linear_schedule_with_warmup: 0 -> 1 over warmup, then linearly to 0 at total_steps (HF default)
  constant,  // get_constant_schedule_with_warmup: 0 -> 1 over warmup, then 1
  cosine,    // get_cosine_schedule_with_warmup: 0 -> 1 over warmup, then half a cosine to 0 (num_cycles 0.5)
};

// "linear", "constant", "cosine"; anything else throws Error(invalid_argument)
// naming the accepted values.
Schedule schedule_from_name(std::string_view name);
const char* schedule_name(Schedule s);

struct ScheduleConfig {
  Schedule kind = Schedule::linear;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;   // optimizer steps of the whole run
  double num_cycles = 0.5;   // cosine only: HF's default half cosine
};

// Warmup steps as TrainingArguments.get_warmup_steps: warmup_steps when > 0,
// else ceil(total_steps * warmup_ratio) (a ratio rounds UP, the product in
// double: 100 * 0.07 = 7.000000000000001 gives 8, exactly as Python does).
// Throws on a negative count or a ratio outside [0, 1].
int64_t warmup_steps_for(int64_t total_steps, int64_t warmup_steps, double warmup_ratio);

// The multiplier of the base lr for the step taken after `steps_done` steps.
double lr_multiplier(const ScheduleConfig& config, int64_t steps_done);
inline double lr_at(double base_lr, const ScheduleConfig& config, int64_t steps_done) {
  return base_lr * lr_multiplier(config, steps_done);
}

// Scaling the learning rate with the batch (`--lr-scale-from B0`):
// linear (Goyal et al. 2017, "Accurate, Large Minibatch SGD"): lr * B / B0;
// sqrt (Krizhevsky 2014; Hoffer et al. 2017): lr * sqrt(B / B0). B is the
// effective batch: batch size x gradient-accumulation steps (x data-parallel
// replicas). Throws unless both batches are positive.
enum class LrScaling { none, linear, sqrt };
LrScaling lr_scaling_from_name(std::string_view name);  // "none", "linear", "sqrt"
const char* lr_scaling_name(LrScaling rule);
double scaled_lr(double base_lr, int64_t effective_batch, int64_t base_batch, LrScaling rule);

}  // namespace stoke::train
