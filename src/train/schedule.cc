#include "train/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "core/error.h"

namespace stoke::train {

Schedule schedule_from_name(std::string_view name) {
  if (name == "linear") return Schedule::linear;
  if (name == "constant") return Schedule::constant;
  if (name == "cosine") return Schedule::cosine;
  throw Error(Errc::invalid_argument,
              fmt::format("schedule '{}' is not known: expected linear, constant or cosine", name));
}

const char* schedule_name(Schedule s) {
  switch (s) {
    case Schedule::linear: return "linear";
    case Schedule::constant: return "constant";
    case Schedule::cosine: return "cosine";
  }
  return "?";
}

int64_t warmup_steps_for(int64_t total_steps, int64_t warmup_steps, double warmup_ratio) {
  if (warmup_steps < 0) throw Error(Errc::invalid_argument, fmt::format("warmup steps {} must be >= 0", warmup_steps));
  if (!(warmup_ratio >= 0.0 && warmup_ratio <= 1.0))
    throw Error(Errc::invalid_argument, fmt::format("warmup ratio {} must be in [0, 1]", warmup_ratio));
  if (warmup_steps > 0) return warmup_steps;
  // math.ceil(num_training_steps * warmup_ratio), the product in double.
  return static_cast<int64_t>(std::ceil(static_cast<double>(total_steps) * warmup_ratio));
}

double lr_multiplier(const ScheduleConfig& c, int64_t steps_done) {
  const double k = static_cast<double>(steps_done);
  const double warmup = static_cast<double>(c.warmup_steps);
  // Warmup: float(current_step) / float(max(1, num_warmup_steps)).
  if (steps_done < c.warmup_steps) return k / std::max(1.0, warmup);
  const double decay_span = static_cast<double>(std::max<int64_t>(1, c.total_steps - c.warmup_steps));
  switch (c.kind) {
    case Schedule::constant: return 1.0;
    case Schedule::linear:
      // max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))
      return std::max(0.0, static_cast<double>(c.total_steps - steps_done) / decay_span);
    case Schedule::cosine: {
      // progress = (current_step - warmup) / max(1, total - warmup);
      // max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress)))
      const double progress = static_cast<double>(steps_done - c.warmup_steps) / decay_span;
      return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * c.num_cycles * 2.0 * progress)));
    }
  }
  throw Error(Errc::internal, "lr_multiplier: unknown schedule");
}

LrScaling lr_scaling_from_name(std::string_view name) {
  if (name == "none") return LrScaling::none;
  if (name == "linear") return LrScaling::linear;
  if (name == "sqrt") return LrScaling::sqrt;
  throw Error(Errc::invalid_argument,
              fmt::format("lr scaling '{}' is not known: expected linear or sqrt (or none)", name));
}

const char* lr_scaling_name(LrScaling rule) {
  switch (rule) {
    case LrScaling::none: return "none";
    case LrScaling::linear: return "linear";
    case LrScaling::sqrt: return "sqrt";
  }
  return "?";
}

double scaled_lr(double base_lr, int64_t effective_batch, int64_t base_batch, LrScaling rule) {
  if (rule == LrScaling::none) return base_lr;
  if (effective_batch < 1 || base_batch < 1)
    throw Error(Errc::invalid_argument,
                fmt::format("lr scaling needs positive batch sizes: effective batch {}, base batch {}",
                            effective_batch, base_batch));
  const double ratio = static_cast<double>(effective_batch) / static_cast<double>(base_batch);
  return rule == LrScaling::linear ? base_lr * ratio : base_lr * std::sqrt(ratio);
}

}  // namespace stoke::train
