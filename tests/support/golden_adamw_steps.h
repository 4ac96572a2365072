// The f32 training goldens (tests/golden, Hugging Face transformers): the
// loss, every parameter gradient of the first batch, and the parameters after
// two torch.optim.AdamW steps, checked on any backend (tests/train: the CPU's
// reference and fast kernels; tests/cuda: the GPU). Also the comparisons the
// other golden training tests share (rows-only goldens, key biases).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/model_folder.h"
#include "model/encoder_training.h"
#include "model/trainable_encoder.h"
#include "support/fixtures.h"
#include "support/golden_training_run.h"
#include "support/goldens.h"

namespace stoke::test::goldens {

inline std::vector<float> slice(const TrainableEncoder& enc, const float* base, const ParamSlot& s) {
  (void)enc;
  return std::vector<float>(base + s.offset, base + s.offset + s.numel);
}

// "after_step." + name -> "after_step_rows." + name.
inline std::string rows_golden_name(const std::string& prefix, const std::string& name) {
  return prefix.substr(0, prefix.size() - 1) + "_rows." + name;
}

// The added architectures' goldens hold the word embeddings' gradient and
// steps only for the rows the training batches use (train.word_embedding_rows),
// as "<what>_rows.<name>"; `got` is cut to the same rows.
inline bool golden_rows_only(const Fixture& fx, const std::string& prefix, const ParamSlot& s, std::vector<float>& got,
                      std::vector<double>& want) {
  const std::string rows_name = rows_golden_name(prefix, s.name);
  if (!fx.golden->find(rows_name)) return false;
  want = golden(*fx.golden, rows_name);
  const int64_t width = s.shape[1];
  std::vector<float> cut;
  for (double r : golden(*fx.golden, "train.word_embedding_rows"))
    cut.insert(cut.end(), got.begin() + static_cast<int64_t>(r) * width, got.begin() + (static_cast<int64_t>(r) + 1) * width);
  got = std::move(cut);
  return true;
}

// Relative error per tensor, or the largest absolute difference for the
// key biases (see the fixtures' notes).
inline void expect_params_match(const Fixture& fx, const TrainableEncoder& enc, const float* base, const std::string& prefix,
                         double rel_tol, const std::string& what) {
  for (const ParamSlot& s : enc.layout.slots()) {
    auto got = slice(enc, base, s);
    std::vector<double> want;
    if (!golden_rows_only(fx, prefix, s, got, want)) want = golden(*fx.golden, prefix + s.name);
    const bool key_bias = s.role == TensorRole::key_bias;
    if (key_bias && prefix != "grad.") {
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
      EXPECT_LE(worst, 1e-3) << what << " " << s.name;
      continue;
    }
    if (key_bias) {
      // Zero up to rounding: compare absolutely, at the noise level.
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << what << " " << s.name;
      continue;
    }
    if (prefix == "grad.") {
      EXPECT_LE(relative_error(got, want), rel_tol) << what << " " << s.name;
      continue;
    }
    const std::string grad_rows = rows_golden_name("grad.", s.name);
    const std::vector<double> first_grad =
        golden(*fx.golden, fx.golden->find(grad_rows) ? grad_rows : "grad." + s.name);
    expect_stepped_param_matches(got, want, first_grad, rel_tol, what + " " + s.name);
  }
}

// The fixture's model in f32 on `backend`: the loss and every gradient of
// the golden batch "train." (relative 1e-4), then the parameters after one
// and two torch.optim.AdamW steps (lr 1e-3, weight decay 0.01 on every
// parameter; the second step on "train2."; relative 1e-5). Everything is
// read back through copy_to_host, so any backend takes it.
inline void expect_golden_loss_gradients_and_two_adamw_steps(Backend& backend, const Fixture& fx) {
  const HfConfig& c = fx.folder.config;
  const ModelWeights weights = open_model_folder_weights(fx.folder);
  auto enc = load_trainable_encoder(c, c, weights, backend, DType::f32, TrainableInit{}, nullptr);
  const Ops& ops = backend.ops();
  const int64_t n = enc->layout.numel();

  std::vector<double> metrics_host(3, 0.0);
  auto metrics_buf = backend.allocate(3 * sizeof(double));
  const TensorView metrics(metrics_buf->data(), DType::f64, {3});
  std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
  auto m = backend.allocate(static_cast<size_t>(n) * 4), v = backend.allocate(static_cast<size_t>(n) * 4);
  backend.copy_to_device(m->data(), zeros.data(), zeros.size() * 4);
  backend.copy_to_device(v->data(), zeros.data(), zeros.size() * 4);
  const TensorView mv(m->data(), DType::f32, {n}), vv(v->data(), DType::f32, {n});
  auto read_back = [&](const float* device) {
    std::vector<float> host(static_cast<size_t>(n));
    backend.copy_to_host(host.data(), device, host.size() * 4);
    backend.synchronize();
    return host;
  };

  EncoderTrainingRunner runner(*enc, backend, 8 * c.usable_positions(), 8);
  const char* batches[] = {"train.", "train2."};
  const char* losses[] = {"loss", "loss_step2"};
  const char* after[] = {"after_step.", "after_step2."};
  for (int step = 0; step < 2; ++step) {
    backend.copy_to_device(enc->grad_data(), zeros.data(), zeros.size() * 4);
    backend.copy_to_device(metrics_buf->data(), metrics_host.data(), 3 * sizeof(double));
    const PackedBatch batch = pack_golden(fx, batches[step]);
    const auto labels = golden_labels(fx, batches[step]);
    MicroBatchKnobs knobs;
    knobs.loss_scale = 1.0f / static_cast<float>(labels.size());
    runner.enqueue(batch, labels, {}, knobs, metrics);
    std::vector<double> got_metrics(3);
    backend.copy_to_host(got_metrics.data(), metrics_buf->data(), 3 * sizeof(double));
    backend.synchronize();
    const double loss = got_metrics[0] / got_metrics[2];
    const double want_loss = best_golden(*fx.golden, losses[step])[0];
    EXPECT_NEAR(loss, want_loss, 1e-5 * std::abs(want_loss)) << losses[step];
    EXPECT_EQ(got_metrics[2], static_cast<double>(labels.size()));
    if (step == 0) expect_params_match(fx, *enc, read_back(enc->grad_data()).data(), "grad.", 1e-4, "gradient");

    Ops::AdamWStep hp;
    hp.step = step + 1;
    hp.lr = 1e-3;
    hp.weight_decay = 0.01;
    ops.adamw(enc->master_flat(), enc->grad_flat(), mv, vv, TensorView{}, TensorView{}, TensorView{}, hp);
    expect_params_match(fx, *enc, read_back(enc->master_data()).data(), after[step], 1e-5, after[step]);
  }
}

}  // namespace stoke::test::goldens
