// LR schedules against Hugging Face's formulas (transformers/optimization.py:
// get_linear_schedule_with_warmup, get_constant_schedule_with_warmup,
// get_cosine_schedule_with_warmup with num_cycles 0.5) and
// TrainingArguments.get_warmup_steps. The expected numbers were printed by
// Python evaluating those lr_lambda bodies (copied into a script, in double,
// "%.17g"), not by this code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "train/schedule.h"

namespace stoke::train {
namespace {

struct Point {
  int64_t steps_done;
  double want;
};

void expect_curve(Schedule kind, int64_t warmup, int64_t total, const std::vector<Point>& points) {
  const ScheduleConfig c{kind, warmup, total};
  for (const Point& p : points)
    EXPECT_DOUBLE_EQ(lr_multiplier(c, p.steps_done), p.want)
        << schedule_name(kind) << " warmup " << warmup << " total " << total << " at " << p.steps_done;
}

TEST(Schedule, LinearWithWarmup) {
  expect_curve(Schedule::linear, 10, 100,
               {{0, 0.0},
                {1, 0.10000000000000001},
                {5, 0.5},
                {9, 0.90000000000000002},
                {10, 1.0},
                {11, 0.98888888888888893},
                {37, 0.69999999999999996},
                {55, 0.5},
                {99, 0.011111111111111112},
                {100, 0.0},
                {120, 0.0}});
  // No warmup: the first step has the full lr; the decay reaches 0 at total.
  expect_curve(Schedule::linear, 0, 7, {{0, 1.0}, {1, 0.8571428571428571}, {5, 0.2857142857142857}, {7, 0.0}});
  // Warmup as long as the run: max(1, total - warmup) keeps it finite.
  expect_curve(Schedule::linear, 3, 3, {{0, 0.0}, {1, 0.33333333333333331}, {3, 0.0}, {5, 0.0}});
}

TEST(Schedule, ConstantWithWarmup) {
  expect_curve(Schedule::constant, 10, 100,
               {{0, 0.0}, {1, 0.10000000000000001}, {5, 0.5}, {9, 0.90000000000000002}, {10, 1.0}, {120, 1.0}});
  expect_curve(Schedule::constant, 0, 7, {{0, 1.0}, {7, 1.0}});
}

TEST(Schedule, CosineWithWarmup) {
  expect_curve(Schedule::cosine, 10, 100,
               {{0, 0.0},
                {5, 0.5},
                {10, 1.0},
                {11, 0.99969541350954794},
                {37, 0.79389262614623657},
                {55, 0.5},
                {99, 0.00030458649045211894},
                {100, 0.0},
                // Past the end HF's cosine rises again (it is a cosine, clamped at 0 only).
                {120, 0.11697777844051099}});
  expect_curve(Schedule::cosine, 0, 7,
               {{0, 1.0}, {1, 0.95048443395120952}, {5, 0.18825509907063326}, {7, 0.0}});
}

TEST(Schedule, LrAtScalesTheBase) {
  const ScheduleConfig c{Schedule::linear, 10, 100};
  EXPECT_DOUBLE_EQ(lr_at(5e-5, c, 5), 2.5e-5);
  EXPECT_DOUBLE_EQ(lr_at(5e-5, c, 55), 2.5e-5);
}

TEST(Schedule, WarmupStepsFromStepsOrRatio) {
  EXPECT_EQ(warmup_steps_for(100, 5, 0.5), 5);     // steps win over a ratio
  EXPECT_EQ(warmup_steps_for(1000, 0, 0.1), 100);  // 1000 * 0.1 is exactly 100.0 in double
  EXPECT_EQ(warmup_steps_for(10, 0, 0.25), 3);     // 2.5 rounds up
  EXPECT_EQ(warmup_steps_for(100, 0, 0.07), 8);    // math.ceil(100 * 0.07) = ceil(7.000000000000001) = 8
  EXPECT_EQ(warmup_steps_for(7, 0, 0.0), 0);
  EXPECT_THROW(warmup_steps_for(100, -1, 0.0), Error);
  EXPECT_THROW(warmup_steps_for(100, 0, 1.5), Error);
  EXPECT_THROW(warmup_steps_for(100, 0, std::nan("")), Error);
}

TEST(Schedule, Names) {
  EXPECT_EQ(schedule_from_name("linear"), Schedule::linear);
  EXPECT_EQ(schedule_from_name("constant"), Schedule::constant);
  EXPECT_EQ(schedule_from_name("cosine"), Schedule::cosine);
  EXPECT_THROW(schedule_from_name("cosine_with_restarts"), Error);
  for (Schedule s : {Schedule::linear, Schedule::constant, Schedule::cosine})
    EXPECT_EQ(schedule_from_name(schedule_name(s)), s);
}

TEST(LrScaling, LinearAndSqrtRules) {
  // Effective batch 256 = 32 x 8 accumulation against a base of 32: x8 or x sqrt(8).
  EXPECT_DOUBLE_EQ(scaled_lr(5e-5, 256, 32, LrScaling::linear), 4e-4);
  EXPECT_DOUBLE_EQ(scaled_lr(5e-5, 256, 32, LrScaling::sqrt), 1.4142135623730951e-4);
  EXPECT_DOUBLE_EQ(scaled_lr(1e-3, 16, 64, LrScaling::linear), 2.5e-4);  // smaller batches scale down
  EXPECT_DOUBLE_EQ(scaled_lr(1e-3, 16, 64, LrScaling::sqrt), 5e-4);
  EXPECT_DOUBLE_EQ(scaled_lr(3e-5, 7, 1, LrScaling::none), 3e-5);
  EXPECT_THROW(scaled_lr(1e-3, 0, 32, LrScaling::linear), Error);
  EXPECT_THROW(scaled_lr(1e-3, 32, 0, LrScaling::sqrt), Error);
  EXPECT_EQ(lr_scaling_from_name("sqrt"), LrScaling::sqrt);
  EXPECT_EQ(lr_scaling_from_name("linear"), LrScaling::linear);
  EXPECT_THROW(lr_scaling_from_name("quadratic"), Error);
}

}  // namespace
}  // namespace stoke::train
