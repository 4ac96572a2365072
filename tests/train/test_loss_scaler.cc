// The fp16 loss scaler (train/loss_scaler.h) against torch.amp.GradScaler's
// numbers (tests/golden/loss_scaler/loss_scaler.json, written by the script
// beside it): skip on inf/NaN, backoff, growth after growth_interval clean
// steps, no growth past f32's range, the unscaled gradients bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "cpu/kernels.h"
#include "support/goldens.h"
#include "train/loss_scaler.h"

namespace stoke {
namespace {

using json = nlohmann::json;

float number(const json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "inf") return std::numeric_limits<float>::infinity();
    if (s == "-inf") return -std::numeric_limits<float>::infinity();
    return std::numeric_limits<float>::quiet_NaN();
  }
  return static_cast<float>(v.get<double>());  // the JSON holds f32 values exactly
}

json golden() {
  return json::parse(read_file(test::goldens::repo_golden_dir() / "loss_scaler" / "loss_scaler.json"));
}

TEST(LossScaler, DefaultsAreTorchs) {
  const LossScalerConfig c;
  EXPECT_EQ(c.init_scale, 65536.0f);
  EXPECT_EQ(c.growth_factor, 2.0f);
  EXPECT_EQ(c.backoff_factor, 0.5f);
  EXPECT_EQ(c.growth_interval, 2000);
}

// A golden run's scaler settings.
LossScalerConfig config_of(const json& run) {
  LossScalerConfig c;
  c.init_scale = run.at("init_scale").get<float>();
  c.growth_factor = run.at("growth_factor").get<float>();
  c.backoff_factor = run.at("backoff_factor").get<float>();
  c.growth_interval = run.at("growth_interval").get<int32_t>();
  return c;
}

// A recorded step's scaled gradients (inf and NaN spelled as strings).
std::vector<float> recorded_grads(const json& record) {
  std::vector<float> grads;
  for (const json& v : record.at("grad")) grads.push_back(number(v));
  return grads;
}

// Every run of the golden, step by step: the same found-inf verdict, the same
// unscaled gradients (bit for bit), the same scale and growth tracker after
// the update; skipped steps counted.
TEST(LossScaler, MatchesTorchGradScaler) {
  const json g = golden();
  ASSERT_GE(g.at("runs").size(), 3u);
  for (const json& run : g.at("runs")) {
    SCOPED_TRACE(run.at("name").get<std::string>());
    const LossScalerConfig c = config_of(run);
    LossScalerState s = initial_loss_scaler_state(c);
    const int64_t steps = run.at("steps").get<int64_t>();
    const json& records = run.at("records");
    size_t next = 0;
    int64_t skipped = 0;
    for (int64_t step = 0; step < steps; ++step) {
      const bool recorded = next < records.size() && records[next].at("step").get<int64_t>() == step;
      if (!recorded) {  // a clean step the golden did not keep
        update_loss_scaler(s, false, c);
        continue;
      }
      const json& r = records[next++];
      SCOPED_TRACE("step " + std::to_string(step));
      ASSERT_EQ(s.scale, r.at("scale_before").get<float>());
      std::vector<float> grads = recorded_grads(r);
      const bool found_inf = unscale_and_check(grads, inverse_loss_scale(s.scale));
      ASSERT_EQ(found_inf, r.at("found_inf").get<bool>());
      if (!found_inf) {
        const json& want = r.at("unscaled");
        ASSERT_EQ(want.size(), grads.size());
        for (size_t i = 0; i < grads.size(); ++i) EXPECT_EQ(grads[i], want[i].get<float>()) << "gradient " << i;
      }
      update_loss_scaler(s, found_inf, c);
      skipped += found_inf ? 1 : 0;
      EXPECT_EQ(s.scale, r.at("scale_after").get<float>());
      EXPECT_EQ(s.growth_tracker, r.at("growth_tracker").get<int32_t>());
    }
    EXPECT_EQ(next, records.size()) << "every recorded step was replayed";
    EXPECT_EQ(s.skipped_steps, skipped);
    EXPECT_EQ(s.optimizer_steps + s.skipped_steps, steps);
  }
}

// The same golden through the ops every backend runs in a step —
// loss_scale_unscale on the gradients, loss_scale_update on the f64 state
// tensor (Ops::LossScaler) — with the reference and the fast CPU kernels
// (the op table compares CUDA's with these, bit for bit).
TEST(LossScaler, TheOpsMatchTorchGradScaler) {
  const json g = golden();
  for (const cpu::Kernels* k : {&cpu::reference_kernels(), &cpu::fast_kernels()}) {
    SCOPED_TRACE(k->name);
    for (const json& run : g.at("runs")) {
      SCOPED_TRACE(run.at("name").get<std::string>());
      const LossScalerConfig c = config_of(run);
      std::vector<double> slots(Ops::LossScaler::kSlots);
      loss_scaler_to_slots(initial_loss_scaler_state(c), false, slots.data());
      const TensorView scaler(slots.data(), DType::f64, {Ops::LossScaler::kSlots});
      const json& records = run.at("records");
      size_t next = 0;
      const int64_t steps = run.at("steps").get<int64_t>();
      for (int64_t step = 0; step < steps; ++step) {
        const bool recorded = next < records.size() && records[next].at("step").get<int64_t>() == step;
        if (!recorded) {
          k->loss_scale_update(scaler, c.growth_factor, c.backoff_factor, c.growth_interval);
          continue;
        }
        const json& r = records[next++];
        SCOPED_TRACE("step " + std::to_string(step));
        ASSERT_EQ(static_cast<float>(slots[Ops::LossScaler::kScale]), r.at("scale_before").get<float>());
        std::vector<float> grads = recorded_grads(r);
        k->loss_scale_unscale(TensorView(grads.data(), DType::f32, {static_cast<int64_t>(grads.size())}), scaler);
        const bool found_inf = slots[Ops::LossScaler::kFoundInf] != 0.0;
        ASSERT_EQ(found_inf, r.at("found_inf").get<bool>());
        if (!found_inf) {
          for (size_t i = 0; i < grads.size(); ++i) EXPECT_EQ(grads[i], r.at("unscaled")[i].get<float>()) << i;
        }
        k->loss_scale_update(scaler, c.growth_factor, c.backoff_factor, c.growth_interval);
        EXPECT_EQ(slots[Ops::LossScaler::kFoundInf], 0.0) << "the update clears the flag";
        EXPECT_EQ(static_cast<float>(slots[Ops::LossScaler::kScale]), r.at("scale_after").get<float>());
        EXPECT_EQ(slots[Ops::LossScaler::kGrowthTracker], r.at("growth_tracker").get<double>());
      }
      EXPECT_EQ(slots[Ops::LossScaler::kOptimizerSteps] + slots[Ops::LossScaler::kSkippedSteps],
                static_cast<double>(steps));
    }
  }
}

// The state machine alone: skip -> backoff, then growth after the interval.
TEST(LossScaler, SkipBackoffThenGrowth) {
  LossScalerConfig c;
  c.growth_interval = 2;
  LossScalerState s = initial_loss_scaler_state(c);
  update_loss_scaler(s, true, c);
  EXPECT_EQ(s.scale, 32768.0f);
  EXPECT_EQ(s.skipped_steps, 1);
  EXPECT_EQ(s.optimizer_steps, 0);
  update_loss_scaler(s, false, c);
  EXPECT_EQ(s.scale, 32768.0f);
  EXPECT_EQ(s.growth_tracker, 1);
  update_loss_scaler(s, false, c);
  EXPECT_EQ(s.scale, 65536.0f);
  EXPECT_EQ(s.growth_tracker, 0);
  EXPECT_EQ(s.optimizer_steps, 2);
  // A NaN anywhere is found, as an inf is.
  std::vector<float> g = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_TRUE(unscale_and_check(g, 0.5f));
  g = {1.0f, 2.0f};
  EXPECT_FALSE(unscale_and_check(g, 0.5f));
  EXPECT_EQ(g[1], 1.0f);
}

}  // namespace
}  // namespace stoke
