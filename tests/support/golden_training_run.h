// Golden micro-batches through one EncoderTrainingRunner, their gradients and
// metrics read back: what the training-graph tests compare (tests/train: the
// padded step against the unpadded one on the CPU; tests/cuda: graphs
// against eager launches, and the GPU against the CPU).
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/backend.h"
#include "io/model_folder.h"
#include "model/encoder_training.h"
#include "model/trainable_encoder.h"
#include "train/optimizer.h"
#include "train/schedule.h"
#include "support/fixtures.h"
#include "support/goldens.h"

namespace stoke::test::goldens {

struct GoldenTrainingRun {
  std::vector<float> grad;
  std::vector<double> metrics;
  EncoderTrainingRunner::GraphStats stats;
  std::vector<ParamSlot> slots;
};

// The golden labels of a micro-batch (`prefix` + "labels").
inline std::vector<int32_t> golden_labels(const Fixture& fx, const std::string& prefix) {
  std::vector<int32_t> out;
  for (double v : golden(*fx.golden, prefix + "labels")) out.push_back(static_cast<int32_t>(v));
  return out;
}

// Dropout 0.1 at every site the architecture trains with one: all of them,
// but a pre-norm encoder's (ModernBERT's) layers, which train without.
inline DropoutRates golden_dropout(const Fixture& fx) {
  const bool prenorm = fx.folder.config.arch->family == LayerFamily::prenorm_encoder;
  return DropoutRates{prenorm ? 0.0f : 0.1f, prenorm ? 0.0f : 0.1f, 0.1f};
}

// The fixture's model (a fresh copy in `dtype`) trains on the golden
// micro-batches `prefixes` in order — at the dropout rates `dropout`, Philox
// key `seed`, micro-steps from `first_step`, each loss weighted by
// `loss_scale` — into zeroed gradients and metrics, through a runner
// `configure(runner)` sets up (graphs on or off, padding). Nothing else
// touches the device.
template <class Configure>
GoldenTrainingRun train_golden_micro_batches(Backend& backend, const Fixture& fx, DType dtype,
                                             std::initializer_list<const char*> prefixes, uint64_t seed,
                                             uint32_t first_step, float loss_scale, const DropoutRates& dropout,
                                             Configure configure) {
  const HfConfig& c = fx.folder.config;
  const ModelWeights weights = open_model_folder_weights(fx.folder);
  auto enc = load_trainable_encoder(c, c, weights, backend, dtype, TrainableInit{}, nullptr);
  const int64_t n = enc->layout.numel();
  auto metrics_buf = backend.allocate(3 * sizeof(double));
  const TensorView metrics(metrics_buf->data(), DType::f64, {3});
  const std::vector<double> zero3(3, 0.0);
  const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
  backend.copy_to_device(enc->grad_data(), zeros.data(), zeros.size() * 4);
  backend.copy_to_device(metrics_buf->data(), zero3.data(), 3 * sizeof(double));
  EncoderTrainingRunner runner(*enc, backend, 8 * c.usable_positions(), 8);
  configure(runner);
  uint32_t step = first_step;
  for (const char* prefix : prefixes) {
    MicroBatchKnobs k;
    k.dropout = dropout;
    k.seed = seed;
    k.step = step++;
    k.loss_scale = loss_scale;
    runner.enqueue(pack_golden(fx, prefix), golden_labels(fx, prefix), {}, k, metrics);
  }
  GoldenTrainingRun r;
  r.grad.resize(static_cast<size_t>(n));
  r.metrics.resize(3);
  backend.copy_to_host(r.grad.data(), enc->grad_data(), r.grad.size() * 4);
  backend.copy_to_host(r.metrics.data(), metrics_buf->data(), 3 * sizeof(double));
  backend.synchronize();
  r.stats = runner.graph_stats();
  r.slots.assign(enc->layout.slots().begin(), enc->layout.slots().end());
  return r;
}

// The same at golden_dropout(fx).
template <class Configure>
GoldenTrainingRun train_golden_micro_batches(Backend& backend, const Fixture& fx, DType dtype,
                                             std::initializer_list<const char*> prefixes, uint64_t seed,
                                             uint32_t first_step, float loss_scale, Configure configure) {
  return train_golden_micro_batches(backend, fx, dtype, prefixes, seed, first_step, loss_scale, golden_dropout(fx),
                                    configure);
}

// Six optimizer steps on the fixture's model (a fresh copy in `dtype`): one
// golden micro-batch each ("train.", "train2.", ...; dropout golden_dropout,
// seed 11, micro-step = the step), clipping at norm 1, weight decay 0.01,
// lr 2e-3 on a linear schedule with 2 warmup steps (a new lr every step, the
// first 0); in f16 the loss scaler, with a NaN put into step 4's gradient
// (that step is skipped). `configure(optimizer)` sets up the optimizer
// (graphs, device-side step values). What the optimizer-graph tests compare.
struct GoldenOptimizerRun {
  std::vector<float> params, m, v;
  std::vector<double> scaler;
  train::Optimizer::GraphStats stats;
};

template <class Configure>
GoldenOptimizerRun train_golden_optimizer_steps(Backend& backend, const Fixture& fx, DType dtype,
                                                Configure configure) {
  const HfConfig& c = fx.folder.config;
  const ModelWeights weights = open_model_folder_weights(fx.folder);
  auto enc = load_trainable_encoder(c, c, weights, backend, dtype, TrainableInit{}, nullptr);
  train::OptimizerOptions oo;
  oo.weight_decay = 0.01;
  oo.max_grad_norm = 1.0;
  oo.loss_scaling = dtype == DType::f16;
  train::Optimizer opt(*enc, backend, oo);
  configure(opt);
  EncoderTrainingRunner runner(*enc, backend, 8 * c.usable_positions(), 8);
  auto metrics_buf = backend.allocate(3 * sizeof(double));
  train::ScheduleConfig schedule;
  schedule.kind = train::Schedule::linear;
  schedule.warmup_steps = 2;
  schedule.total_steps = 6;
  const int64_t n = enc->layout.numel();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t step = 0; step < 6; ++step) {
    const char* batch = step % 2 == 0 ? "train." : "train2.";
    opt.zero_grad();
    const std::vector<int32_t> labels = golden_labels(fx, batch);
    MicroBatchKnobs knobs;
    knobs.dropout = golden_dropout(fx);
    knobs.seed = 11;
    knobs.step = static_cast<uint32_t>(step);
    knobs.loss_scale = 1.0f / static_cast<float>(labels.size());
    knobs.loss_scaler = opt.loss_scaler();
    runner.enqueue(pack_golden(fx, batch), labels, {}, knobs, TensorView(metrics_buf->data(), DType::f64, {3}));
    if (oo.loss_scaling && step == 3) backend.copy_to_device(enc->grad_data() + n / 2, &nan, 4);
    opt.step(step + 1, train::lr_at(2e-3, schedule, step));
  }
  GoldenOptimizerRun r;
  r.params.resize(static_cast<size_t>(n));
  r.m.resize(static_cast<size_t>(n));
  r.v.resize(static_cast<size_t>(n));
  r.scaler.assign(Ops::LossScaler::kSlots, 0.0);
  backend.copy_to_host(r.params.data(), enc->master_data(), r.params.size() * 4);
  opt.copy_state_to_host(r.m.data(), r.v.data());
  opt.copy_scaler_to_host(r.scaler.data());
  backend.synchronize();
  r.stats = opt.graph_stats();
  return r;
}

// Two optimizer runs ended on the same bits: parameters, both moments, the
// loss scaler's state.
inline void expect_same_optimizer_state(const GoldenOptimizerRun& got, const GoldenOptimizerRun& want) {
  EXPECT_TRUE(got.params == want.params) << "parameters";
  EXPECT_TRUE(got.m == want.m) << "exp_avg";
  EXPECT_TRUE(got.v == want.v) << "exp_avg_sq";
  EXPECT_EQ(std::memcmp(got.scaler.data(), want.scaler.data(), want.scaler.size() * 8), 0) << "loss scaler";
}

}  // namespace stoke::test::goldens
