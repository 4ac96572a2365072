// Golden micro-batches through one EncoderTrainingRunner, their gradients and
// metrics read back: what the training-graph tests compare (tests/train: the
// padded step against the unpadded one on the CPU; tests/cuda: graphs
// against eager launches, and the GPU against the CPU).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/model_folder.h"
#include "model/encoder_training.h"
#include "model/trainable_encoder.h"
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

// The fixture's model (a fresh copy in `dtype`) trains on the golden
// micro-batches `prefixes` in order — dropout 0.1 at every site, Philox key
// `seed`, micro-steps from `first_step`, each loss weighted by `loss_scale` —
// into zeroed gradients and metrics, through a runner `configure(runner)`
// sets up (graphs on or off, padding). Nothing else touches the device.
template <class Configure>
GoldenTrainingRun train_golden_micro_batches(Backend& backend, const Fixture& fx, DType dtype,
                                             std::initializer_list<const char*> prefixes, uint64_t seed,
                                             uint32_t first_step, float loss_scale, Configure configure) {
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
    k.dropout = {0.1f, 0.1f, 0.1f};
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

}  // namespace stoke::test::goldens
