// Training against the Hugging Face goldens of both fixture models and of the
// added architectures (tests/golden: ELECTRA, DistilBERT, RoBERTa, CamemBERT, XLM-R 5): the loss
// and every parameter gradient of the first 8-text batch (relative 1e-4), and
// the parameters after one and two torch.optim.AdamW steps (lr 1e-3, weight
// decay 0.01 on every parameter; relative 1e-5; the attention key biases,
// whose gradient is mathematically zero, absolute 1e-3), with the reference
// kernels and the fast ones. The CLI runs the same check end to end in
// test_cli_train. Also: the graph-shaped step (padded to its bucket, the
// layers' dropout step read from device memory) against the unpadded one,
// and the bucket planning (model/train_buckets.h) on a real length mix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <cstring>
#include <limits>
#include <memory>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/error.h"
#include "core/file_util.h"
#include "cpu/cpu_backend.h"
#include "io/model_folder.h"
#include "model/encoder_training.h"
#include "model/train_buckets.h"
#include "model/trainable_encoder.h"
#include "train/loss_scaler.h"
#include "train/optimizer.h"
#include "train/micro_batch_split.h"
#include "train/trainer.h"
#include "support/capped_backend.h"
#include "support/fixtures.h"
#include "support/golden_adamw_steps.h"
#include "support/golden_training_run.h"
#include "support/goldens.h"
#include "text/tokenizer_loader.h"
#include "train/batch_order.h"

namespace stoke {
namespace {

using namespace test::goldens;

struct Case {
  const char* model;
  const char* kernels;
};

class TrainGolden : public ::testing::TestWithParam<Case> {};

TEST_P(TrainGolden, LossGradientsAndTwoAdamWSteps) {
  const Case& k = GetParam();
  cpu::CpuBackend backend(std::string(k.kernels) == "reference" ? cpu::reference_kernels() : cpu::fast_kernels());
  expect_golden_loss_gradients_and_two_adamw_steps(backend, open_fixture(k.model));
}

// bf16 mixed precision: bf16 GEMM operands and attention, f32 master weights,
// residual stream, LayerNorm and gradients. Each bf16 rounding is 2^-9
// relative, so the loss and gradients stay within a few 1e-3 of the f32
// goldens; the tolerances (loss 1e-2, gradients 5e-2, parameters after two
// AdamW steps 2e-2) leave room for the tiny model's few long reductions and
// still catch a missing term, which is an O(1) error.
TEST(TrainGoldenBf16, LossGradientsAndStepsWithinBf16Tolerance) {
  for (const char* model : {"tiny-bert", "tiny-xlmr", "tiny-electra", "tiny-distilbert", "tiny-roberta", "tiny-camembert",
                            "tiny-xlmr5", "tiny-mpnet", "tiny-modernbert", "tiny-gte", "tiny-nomic"}) {
    const Fixture fx = open_fixture(model);
    const HfConfig& c = fx.folder.config;
    const ModelWeights weights = open_model_folder_weights(fx.folder);
    cpu::CpuBackend backend(cpu::fast_kernels());
    auto enc = load_trainable_encoder(c, c, weights, backend, DType::bf16, TrainableInit{}, nullptr);
    const int64_t n = enc->layout.numel();
    auto metrics_buf = backend.allocate(3 * sizeof(double));
    std::vector<double> zero3(3, 0.0);
    backend.copy_to_device(metrics_buf->data(), zero3.data(), 3 * sizeof(double));
    std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
    backend.copy_to_device(enc->grad_data(), zeros.data(), zeros.size() * 4);
    EncoderTrainingRunner runner(*enc, backend, 8 * c.usable_positions(), 8);
    const auto labels = golden_labels(fx, "train.");
    MicroBatchKnobs knobs;
    knobs.loss_scale = 1.0f / 8.0f;
    runner.enqueue(pack_golden(fx, "train."), labels, {}, knobs, TensorView(metrics_buf->data(), DType::f64, {3}));
    std::vector<double> m(3);
    backend.copy_to_host(m.data(), metrics_buf->data(), 3 * sizeof(double));
    backend.synchronize();
    const double want = golden(*fx.golden, "loss")[0];
    EXPECT_NEAR(m[0] / m[2], want, 1e-2 * want) << model;
    double worst = 0;
    for (const ParamSlot& s : enc->layout.slots()) {
      if (s.role == TensorRole::key_bias) continue;  // zero up to rounding
      auto got = std::vector<float>(enc->grad_data() + s.offset, enc->grad_data() + s.offset + s.numel);
      std::vector<double> want_grad;
      if (!golden_rows_only(fx, "grad.", s, got, want_grad)) want_grad = golden(*fx.golden, "grad." + s.name);
      const double e = relative_error(got, want_grad);
      worst = std::max(worst, e);
      EXPECT_LE(e, 5e-2) << model << " grad " << s.name;
    }
    std::printf("%s bf16: loss %.6f (f32 golden %.6f), worst gradient relative error %.3g\n", model, m[0] / m[2], want,
                worst);
  }
}

// f16 training with the dynamic loss scale (train/optimizer.h): f16 GEMM
// operands and attention, f32 masters, residual stream, LayerNorm and
// gradients; the loss gradient times the device-side scale, the gradients
// unscaled and checked on the device, AdamW skipped on an inf/NaN. The same
// two golden steps as TrainGolden (lr 1e-3, weight decay 0.01 everywhere, no
// clipping) through the real Optimizer. The tolerances are bf16's (test
// above) scaled by the two formats' unit roundoff, 2^-11 / 2^-8 = 1/8,
// rounded up: loss 2e-3, gradients 1e-2. After the steps, AdamW's update is
// lr x a normalised gradient, so an element whose gradient is at f16's noise
// floor may move by up to 2 lr where the f32 run moved the other way;
// parameters are compared relatively at 1e-2 (leaving out the elements with
// a ~0 golden gradient; the key biases, whose gradient is exactly 0 up to
// rounding, absolutely at 4 lr).
TEST(TrainGoldenF16, LossScaledStepsWithinF16Tolerance) {
  for (const char* model : {"tiny-bert", "tiny-xlmr", "tiny-modernbert"}) {
    SCOPED_TRACE(model);
    const Fixture fx = open_fixture(model);
    const HfConfig& c = fx.folder.config;
    const ModelWeights weights = open_model_folder_weights(fx.folder);
    cpu::CpuBackend backend(cpu::fast_kernels());
    auto enc = load_trainable_encoder(c, c, weights, backend, DType::f16, TrainableInit{}, nullptr);
    train::OptimizerOptions oo;
    oo.weight_decay = 0.01;
    oo.decay_all = true;
    oo.max_grad_norm = 0;
    oo.loss_scaling = true;
    train::Optimizer opt(*enc, backend, oo);
    auto metrics_buf = backend.allocate(3 * sizeof(double));
    const std::vector<double> zero3(3, 0.0);
    EncoderTrainingRunner runner(*enc, backend, 8 * c.usable_positions(), 8);
    const char* batches[] = {"train.", "train2."};
    const char* losses[] = {"loss", "loss_step2"};
    double worst_grad = 0;
    for (int step = 0; step < 2; ++step) {
      opt.zero_grad();
      backend.copy_to_device(metrics_buf->data(), zero3.data(), 3 * sizeof(double));
      const auto labels = golden_labels(fx, batches[step]);
      MicroBatchKnobs knobs;
      knobs.loss_scale = 1.0f / static_cast<float>(labels.size());
      knobs.loss_scaler = opt.loss_scaler();
      runner.enqueue(pack_golden(fx, batches[step]), labels, {}, knobs,
                     TensorView(metrics_buf->data(), DType::f64, {3}));
      std::vector<double> m(3);
      backend.copy_to_host(m.data(), metrics_buf->data(), 3 * sizeof(double));
      backend.synchronize();
      const double want = best_golden(*fx.golden, losses[step])[0];
      EXPECT_NEAR(m[0] / m[2], want, 2e-3 * want) << losses[step];
      if (step == 0) {
        // The gradient buffer holds 65536 x the gradient (a power of two: exact).
        for (const ParamSlot& s : enc->layout.slots()) {
          if (s.role == TensorRole::key_bias) continue;  // zero up to rounding
          std::vector<float> got(enc->grad_data() + s.offset, enc->grad_data() + s.offset + s.numel);
          for (float& g : got) g /= 65536.0f;
          std::vector<double> want_grad;
          if (!golden_rows_only(fx, "grad.", s, got, want_grad)) want_grad = golden(*fx.golden, "grad." + s.name);
          const double e = relative_error(got, want_grad);
          worst_grad = std::max(worst_grad, e);
          EXPECT_LE(e, 1e-2) << "grad " << s.name;
        }
      }
      opt.step(step + 1, 1e-3);
      backend.synchronize();
    }
    std::vector<double> slots(Ops::LossScaler::kSlots);
    opt.copy_scaler_to_host(slots.data());
    backend.synchronize();
    const LossScalerState st = loss_scaler_from_slots(slots.data());
    EXPECT_EQ(st.optimizer_steps, 2);
    EXPECT_EQ(st.skipped_steps, 0);
    EXPECT_EQ(st.scale, 65536.0f);
    double worst_param = 0;
    for (const ParamSlot& s : enc->layout.slots()) {
      std::vector<float> got(enc->master_data() + s.offset, enc->master_data() + s.offset + s.numel);
      std::vector<double> want;
      if (!golden_rows_only(fx, "after_step2.", s, got, want)) want = golden(*fx.golden, "after_step2." + s.name);
      if (s.role == TensorRole::key_bias) {
        // A gradient that is mathematically zero: Adam's first steps move each
        // element by up to lr in the direction of the rounding noise, which f16
        // and f32 draw differently — up to 2 lr apart per step, 4 lr after two.
        for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 4e-3) << s.name;
        continue;
      }
      const std::string grad_rows = rows_golden_name("grad.", s.name);
      const std::vector<double> first_grad =
          golden(*fx.golden, fx.golden->find(grad_rows) ? grad_rows : "grad." + s.name);
      std::vector<float> strict_got;
      std::vector<double> strict_want;
      for (size_t i = 0; i < got.size(); ++i) {
        if (std::abs(first_grad[i]) < 1e-7) continue;  // compared at lr by the f32 test; here noise either way
        strict_got.push_back(got[i]);
        strict_want.push_back(want[i]);
      }
      const double e = relative_error(strict_got, strict_want);
      worst_param = std::max(worst_param, e);
      EXPECT_LE(e, 1e-2) << "after two steps: " << s.name;
    }
    std::printf("%s f16: worst gradient relative error %.3g, worst parameter after two steps %.3g\n", model,
                worst_grad, worst_param);
  }
}

// A step whose gradient holds an inf or NaN is skipped on the device: the
// parameters and both moments keep their bits, the scale backs off, AdamW's
// t does not advance — so the next clean step is bit for bit the first step
// of a run that never saw the bad one (started at the backed-off scale).
TEST(TrainLossScaler, AnInfGradientSkipsTheStepAndTheNextIsTheFirst) {
  for (const char* kernels : {"reference", "fast"}) {
    SCOPED_TRACE(kernels);
    const Fixture fx = open_fixture("tiny-bert");
    const HfConfig& c = fx.folder.config;
    const ModelWeights weights = open_model_folder_weights(fx.folder);
    cpu::CpuBackend backend(std::string(kernels) == "reference" ? cpu::reference_kernels() : cpu::fast_kernels());
    struct Run {
      std::unique_ptr<TrainableEncoder> enc;
      std::unique_ptr<train::Optimizer> opt;
      std::unique_ptr<EncoderTrainingRunner> runner;
    };
    auto metrics_buf = backend.allocate(3 * sizeof(double));
    auto make = [&](float init_scale) {
      Run r;
      r.enc = load_trainable_encoder(c, c, weights, backend, DType::f16, TrainableInit{}, nullptr);
      train::OptimizerOptions oo;
      oo.weight_decay = 0.01;
      oo.loss_scaling = true;
      oo.scaler.init_scale = init_scale;
      r.opt = std::make_unique<train::Optimizer>(*r.enc, backend, oo);  // clipping on (max norm 1)
      r.runner = std::make_unique<EncoderTrainingRunner>(*r.enc, backend, 8 * c.usable_positions(), 8);
      return r;
    };
    auto micro_batch = [&](Run& r, const char* batch) {
      r.opt->zero_grad();
      const auto labels = golden_labels(fx, batch);
      MicroBatchKnobs knobs;
      knobs.dropout = {0.1f, 0.1f, 0.1f};
      knobs.seed = 7;
      knobs.loss_scale = 1.0f / static_cast<float>(labels.size());
      knobs.loss_scaler = r.opt->loss_scaler();
      r.runner->enqueue(pack_golden(fx, batch), labels, {}, knobs, TensorView(metrics_buf->data(), DType::f64, {3}));
    };
    const int64_t n = ParamLayout(c).numel();
    auto read = [&](const float* device) {
      std::vector<float> h(static_cast<size_t>(n));
      backend.copy_to_host(h.data(), device, h.size() * 4);
      backend.synchronize();
      return h;
    };
    auto scaler = [&](const train::Optimizer& opt) {
      std::vector<double> slots(Ops::LossScaler::kSlots);
      opt.copy_scaler_to_host(slots.data());
      backend.synchronize();
      EXPECT_EQ(slots[Ops::LossScaler::kFoundInf], 0.0) << "loss_scale_update clears the flag";
      return loss_scaler_from_slots(slots.data());
    };

    Run a = make(65536.0f);
    // Step 1 of run a: moments of a first clean step, then a step whose gradient holds a NaN and an inf.
    micro_batch(a, "train.");
    a.opt->step(1, 1e-3);
    const std::vector<float> p1 = read(a.enc->master_data()), m1 = read(static_cast<float*>(a.opt->exp_avg().data)),
                             v1 = read(static_cast<float*>(a.opt->exp_avg_sq().data));
    micro_batch(a, "train2.");
    const float bad[2] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()};
    backend.copy_to_device(a.enc->grad_data() + 100, &bad[0], 4);
    backend.copy_to_device(a.enc->grad_data() + n - 1, &bad[1], 4);
    a.opt->step(2, 1e-3);
    EXPECT_EQ(read(a.enc->master_data()), p1) << "a skipped step changed the parameters";
    EXPECT_EQ(read(static_cast<float*>(a.opt->exp_avg().data)), m1) << "a skipped step changed exp_avg";
    EXPECT_EQ(read(static_cast<float*>(a.opt->exp_avg_sq().data)), v1) << "a skipped step changed exp_avg_sq";
    LossScalerState want = initial_loss_scaler_state(LossScalerConfig{});
    update_loss_scaler(want, false, LossScalerConfig{});
    update_loss_scaler(want, true, LossScalerConfig{});
    const LossScalerState got = scaler(*a.opt);
    EXPECT_EQ(got.scale, 32768.0f);
    EXPECT_EQ(got.scale, want.scale);
    EXPECT_EQ(got.skipped_steps, 1);
    EXPECT_EQ(got.optimizer_steps, 1);
    EXPECT_EQ(got.growth_tracker, 0);
    // The next step (host step 3) is AdamW's t = 2: equal to run b, which took
    // step 1 and then step 2 on the same batch, never seeing the bad one.
    micro_batch(a, "train2.");
    a.opt->step(3, 1e-3);
    Run b = make(65536.0f);
    micro_batch(b, "train.");
    b.opt->step(1, 1e-3);
    b.opt->load_scaler(got);  // the backed-off scale (a power of two either way: the same gradient bits)
    micro_batch(b, "train2.");
    b.opt->step(2, 1e-3);
    EXPECT_EQ(read(a.enc->master_data()), read(b.enc->master_data()));
    EXPECT_EQ(read(static_cast<float*>(a.opt->exp_avg().data)), read(static_cast<float*>(b.opt->exp_avg().data)));
    EXPECT_EQ(read(static_cast<float*>(a.opt->exp_avg_sq().data)),
              read(static_cast<float*>(b.opt->exp_avg_sq().data)));
    EXPECT_EQ(scaler(*a.opt).optimizer_steps, 2);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TrainGolden,
                         ::testing::Values(Case{"tiny-bert", "reference"}, Case{"tiny-bert", "fast"},
                                           Case{"tiny-xlmr", "reference"}, Case{"tiny-xlmr", "fast"},
                                           Case{"tiny-electra", "reference"}, Case{"tiny-electra", "fast"},
                                           Case{"tiny-distilbert", "reference"}, Case{"tiny-distilbert", "fast"},
                                           Case{"tiny-roberta", "reference"}, Case{"tiny-roberta", "fast"},
                                           Case{"tiny-camembert", "reference"}, Case{"tiny-camembert", "fast"},
                                           Case{"tiny-xlmr5", "reference"}, Case{"tiny-xlmr5", "fast"},
                                           Case{"tiny-mpnet", "reference"}, Case{"tiny-mpnet", "fast"},
                                           Case{"tiny-modernbert", "reference"}, Case{"tiny-modernbert", "fast"},
                                           Case{"tiny-gte", "reference"}, Case{"tiny-gte", "fast"},
                                           Case{"tiny-nomic", "reference"}, Case{"tiny-nomic", "fast"}),
                         [](const auto& info) {
                           // "tiny-bert" -> bert_reference (the existing names)
                           return std::string(info.param.model).substr(5) + "_" + info.param.kernels;
                         });

// Dropout keyed by the place in the whole batch (MicroBatchKnobs'
// token_offset and sequence_offset): the golden 8-text batch run whole, and
// run as two halves each with the tokens and sequences before it as offsets
// (what two data-parallel ranks do), give the same gradient — every dropout
// site (embeddings, attention probabilities, attention and FFN outputs, the
// head's one or two) draws the same masks — up to the order the two halves'
// parameter gradients add in. Without the offsets the halves draw other masks
// and the gradient moves far outside that tolerance. BERT (pooler head),
// RoBERTa (dropout before the head's dense), MPNet (relative attention),
// with the fast kernels; BERT also with the reference.
TEST(TrainDropoutSplit, TwoHalvesWithOffsetsGiveTheWholeBatchsGradient) {
  for (const char* model : {"tiny-bert", "tiny-roberta", "tiny-mpnet", "tiny-gte"})
    for (const char* kernels : {"reference", "fast"}) {
      if (std::string(kernels) == "reference" && std::string(model) != "tiny-bert") continue;  // the slow set once
      SCOPED_TRACE(std::string(model) + " " + kernels);
      const Fixture fx = open_fixture(model);
      const HfConfig& c = fx.folder.config;
      const ModelWeights weights = open_model_folder_weights(fx.folder);
      cpu::CpuBackend backend(std::string(kernels) == "reference" ? cpu::reference_kernels() : cpu::fast_kernels());
      auto enc = load_trainable_encoder(c, c, weights, backend, DType::f32, TrainableInit{}, nullptr);
      const int64_t n = enc->layout.numel();
      auto metrics_buf = backend.allocate(3 * sizeof(double));
      const TensorView metrics(metrics_buf->data(), DType::f64, {3});
      const std::vector<double> zero3(3, 0.0);
      const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
      const PackedBatch whole = pack_golden(fx, "train.");
      const std::vector<int32_t> labels = golden_labels(fx, "train.");
      const int64_t B = whole.sequences(), half = B / 2;
      EncoderTrainingRunner runner(*enc, backend, whole.tokens(), B);
      MicroBatchKnobs knobs;
      knobs.dropout = {0.1f, 0.1f, 0.1f};
      knobs.seed = 1234;
      knobs.step = 3;
      knobs.loss_scale = 1.0f / static_cast<float>(B);
      // Sequences [b0, b1) of the whole batch, packed on their own.
      auto part = [&](int64_t b0, int64_t b1) {
        PackedBatch p;
        p.clear();
        for (int64_t b = b0; b < b1; ++b) {
          const auto from = static_cast<size_t>(whole.cu_seqlens[static_cast<size_t>(b)]);
          const auto to = static_cast<size_t>(whole.cu_seqlens[static_cast<size_t>(b) + 1]);
          p.add(std::span<const int32_t>(whole.ids.data() + from, to - from),
                std::span<const int32_t>(whole.type_ids.data() + from, to - from), c);
        }
        return p;
      };
      auto gradient = [&](bool split, bool offsets) {
        backend.copy_to_device(enc->grad_data(), zeros.data(), zeros.size() * 4);
        backend.copy_to_device(metrics_buf->data(), zero3.data(), 3 * sizeof(double));
        if (!split) {
          runner.enqueue(whole, labels, {}, knobs, metrics);
        } else {
          for (const int64_t b0 : {int64_t{0}, half}) {
            const int64_t b1 = b0 == 0 ? half : B;
            MicroBatchKnobs k = knobs;
            k.token_offset = offsets ? static_cast<uint64_t>(whole.cu_seqlens[static_cast<size_t>(b0)]) : 0;
            k.sequence_offset = offsets ? static_cast<uint64_t>(b0) : 0;
            const std::vector<int32_t> part_labels(labels.begin() + b0, labels.begin() + b1);
            runner.enqueue(part(b0, b1), part_labels, {}, k, metrics);
          }
        }
        std::vector<float> g(static_cast<size_t>(n));
        backend.copy_to_host(g.data(), enc->grad_data(), g.size() * 4);
        backend.synchronize();
        return g;
      };
      const std::vector<float> want = gradient(false, false), got = gradient(true, true);
      const std::vector<float> unkeyed = gradient(true, false);
      double worst_unkeyed = 0;
      for (const ParamSlot& s : enc->layout.slots()) {
        if (s.role == TensorRole::key_bias) continue;  // zero up to rounding
        const std::vector<float> g(got.begin() + s.offset, got.begin() + s.offset + s.numel);
        const std::vector<float> u(unkeyed.begin() + s.offset, unkeyed.begin() + s.offset + s.numel);
        const std::vector<double> w(want.begin() + s.offset, want.begin() + s.offset + s.numel);
        EXPECT_LE(relative_error(g, w), 1e-5) << s.name;
        worst_unkeyed = std::max(worst_unkeyed, relative_error(u, w));
      }
      EXPECT_GT(worst_unkeyed, 1e-2) << "halves without offsets drew the same masks: the check would not test them";
    }
}

// ---- graphs: the padded ("graph-shaped") step equals the unpadded one ----
//
// The CPU cannot capture, so EncoderTrainingRunner::set_padding_without_capture
// enqueues exactly what a graph would record, eagerly: the micro-batch padded
// to its bucket (padding tokens in sequences of their own), the layers'
// dropout step read from device memory (Ops::DropoutStep), the head and the
// loss on the real sequences. Every dropout site is on (p = 0.1). Two
// micro-batches accumulate (steps 7 and 8: the device step is rewritten by a
// copy per micro-batch). Reference kernels: gradients and metrics BITWISE
// equal — each parameter-gradient sum is a double loop over the rows, and the
// padding rows add exactly +-0 (their gradient is 0 and their activations
// finite). Fast kernels: the GEMMs' row blocking may change with the row
// count, so the sums may associate differently: relative 1e-6 per tensor
// (on the development machine they came out bit for bit too; the test
// prints the count of differing elements), metrics bitwise (the head runs
// on the real rows, unpadded, in both). Pre-norm encoders (ModernBERT) train
// with dropout in the classifier only; their head pools the real rows (a
// mean, or the first token) and the padding's rows of d h_out are zeros.
// MPNet's relative bias table has the bucket's 2 max_seqlen - 1 rows: the
// same bias per distance, and the distances only padding sequences reach get
// an exact 0 in its gradient.
using StepResult = GoldenTrainingRun;

StepResult run_two_micro_batches(const Fixture& fx, const char* kernels, bool padded, uint32_t first_step,
                                 const DropoutRates& dropout) {
  cpu::CpuBackend backend(std::string(kernels) == "reference" ? cpu::reference_kernels() : cpu::fast_kernels());
  return train_golden_micro_batches(backend, fx, DType::f32, {"train.", "train2."}, 1234, first_step, 1.0f / 16.0f,
                                    dropout,
                                    [&](EncoderTrainingRunner& r) { r.set_padding_without_capture(padded); });
}

StepResult run_two_micro_batches(const Fixture& fx, const char* kernels, bool padded, uint32_t first_step) {
  return run_two_micro_batches(fx, kernels, padded, first_step, golden_dropout(fx));
}

// The padded step against the unpadded one, as the comment above says.
void expect_padded_step_equals_unpadded(const Fixture& fx, const std::string& label, const char* kernels,
                                        const DropoutRates& dropout) {
  const bool ref = std::string(kernels) == "reference";
  const StepResult eager = run_two_micro_batches(fx, kernels, false, 7, dropout);
  const StepResult padded = run_two_micro_batches(fx, kernels, true, 7, dropout);
  EXPECT_EQ(eager.stats.padded_tokens, 0);
  EXPECT_EQ(eager.stats.eager, 2);
  ASSERT_GT(padded.stats.padded_tokens, padded.stats.real_tokens) << "the batches were not padded";
  EXPECT_EQ(padded.stats.eager, 0);
  EXPECT_EQ(padded.stats.buckets, 0);  // nothing captured on the CPU
  EXPECT_EQ(std::memcmp(eager.metrics.data(), padded.metrics.data(), 3 * sizeof(double)), 0)
      << "loss " << eager.metrics[0] << " vs " << padded.metrics[0];
  EXPECT_EQ(padded.metrics[2], eager.metrics[2]);  // padded sequences are not counted
  size_t differing = 0;
  double worst = 0;
  for (const ParamSlot& s : padded.slots) {
    const std::vector<float> g(padded.grad.begin() + s.offset, padded.grad.begin() + s.offset + s.numel);
    const std::vector<double> w(eager.grad.begin() + s.offset, eager.grad.begin() + s.offset + s.numel);
    for (size_t i = 0; i < g.size(); ++i) differing += g[i] != static_cast<float>(w[i]);
    if (s.role == TensorRole::key_bias) continue;  // zero up to rounding
    const double e = relative_error(g, w);
    worst = std::max(worst, e);
    if (!ref) {
      EXPECT_LE(e, 1e-6) << s.name;
    }
  }
  if (ref) {
    EXPECT_EQ(differing, 0u) << "the reference kernels must give the very bits (worst " << worst << ")";
  }
  std::printf("[graph-shaped %s %s] tokens %lld -> %lld padded; gradient elements differing: %zu, worst"
              " relative error %.3g\n",
              label.c_str(), kernels, static_cast<long long>(padded.stats.real_tokens),
              static_cast<long long>(padded.stats.padded_tokens), differing, worst);
}

TEST(TrainGraphShape, PaddedStepEqualsTheUnpaddedStep) {
  // BERT (pooler), RoBERTa (dropout before the head's dense), ELECTRA
  // (embedding projection), DistilBERT (ReLU head), GTE and NomicBERT
  // (rotary positions, gated FFN); the reference kernels on BERT and GTE.
  for (const char* model : {"tiny-bert", "tiny-roberta", "tiny-electra", "tiny-distilbert", "tiny-gte", "tiny-nomic"})
    for (const char* kernels : {"reference", "fast"}) {
      const bool ref = std::string(kernels) == "reference";
      if (ref && std::string(model) != "tiny-bert" && std::string(model) != "tiny-gte") continue;
      SCOPED_TRACE(std::string(model) + " " + kernels);
      const Fixture fx = open_fixture(model);
      expect_padded_step_equals_unpadded(fx, model, kernels, golden_dropout(fx));
    }
}

// ModernBERT (pre-norm; its head's mean pooling, and first-token pooling) and
// MPNet (relative attention), with every dropout the architecture trains with
// and with none; the reference kernels and the fast ones.
TEST(TrainGraphShape, PreNormAndRelativeAttentionPaddedStepsEqualTheUnpaddedSteps) {
  for (const char* model : {"tiny-modernbert", "tiny-mpnet"})
    for (const bool mean_pooling : {true, false}) {
      Fixture fx = open_fixture(model);
      const bool prenorm = fx.folder.config.arch->family == LayerFamily::prenorm_encoder;
      if (!prenorm && !mean_pooling) continue;  // MPNet's head takes the first token
      if (prenorm) {
        ASSERT_TRUE(fx.folder.config.classifier_mean_pooling) << "the fixture's own pooling is the mean";
        fx.folder.config.classifier_mean_pooling = mean_pooling;
      }
      for (const char* kernels : {"reference", "fast"})
        for (const bool dropout : {true, false}) {
          const std::string label = std::string(model) + (prenorm ? (mean_pooling ? " mean" : " cls") : "") +
                                    (dropout ? " dropout" : " no-dropout");
          SCOPED_TRACE(label + " " + kernels);
          expect_padded_step_equals_unpadded(fx, label, kernels, dropout ? golden_dropout(fx) : DropoutRates{});
        }
    }
}

// The device step is what the padded step's layer dropout draws from: another
// step there moves the gradient far outside the tolerance above.
TEST(TrainGraphShape, TheDeviceStepKeysTheLayersMasks) {
  const Fixture fx = open_fixture("tiny-bert");
  const StepResult a = run_two_micro_batches(fx, "fast", true, 7), b = run_two_micro_batches(fx, "fast", true, 9);
  const std::vector<double> w(a.grad.begin(), a.grad.end());
  EXPECT_GT(relative_error(b.grad, w), 1e-3);
}

// A backend that says it can capture but refuses when asked (the CPU's
// kernels underneath): a capture that fails on a GPU takes this path. The
// runner must run that micro-batch at its padded shapes eagerly and every
// later one eagerly, unpadded — the same gradients, bit for bit with the
// reference kernels.
class RefusingCaptureBackend final : public Backend {
 public:
  explicit RefusingCaptureBackend(const cpu::Kernels& k) : inner_(k) {}
  std::string name() const override { return "cpu (refusing captures)"; }
  bool device_is_host() const override { return true; }
  std::unique_ptr<Buffer> allocate(size_t bytes) override { return inner_.allocate(bytes); }
  std::unique_ptr<Buffer> allocate_host(size_t bytes) override { return inner_.allocate_host(bytes); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override { inner_.copy_to_device(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { inner_.copy_to_host(dst, src, bytes); }
  std::shared_ptr<Event> record_event() override { return inner_.record_event(); }
  bool event_done(const Event& e) override { return inner_.event_done(e); }
  void wait(const Event& e) override { inner_.wait(e); }
  void throttle(const Event& e) override { inner_.throttle(e); }
  void drain() noexcept override { inner_.drain(); }
  const Ops& ops() const override { return inner_.ops(); }
  FreeMemory free_memory() const override { return inner_.free_memory(); }
  bool can_capture() const override { return true; }
  void begin_capture() override {
    ++refused;
    throw Error(Errc::device, "capture refused (test)");
  }
  int refused = 0;

 private:
  cpu::CpuBackend inner_;
};

TEST(TrainGraphShape, AFailedCaptureRunsEagerlyForGood) {
  for (const char* model : {"tiny-bert", "tiny-modernbert", "tiny-mpnet"}) {
    SCOPED_TRACE(model);
    const Fixture fx = open_fixture(model);
    RefusingCaptureBackend backend(cpu::reference_kernels());
    const StepResult got =
        train_golden_micro_batches(backend, fx, DType::f32, {"train.", "train2."}, 1234, 7, 1.0f / 16.0f,
                                   [](EncoderTrainingRunner& r) { EXPECT_TRUE(r.graph_stats().on); });
    const EncoderTrainingRunner::GraphStats& st = got.stats;
    EXPECT_TRUE(st.capture_failed);
    EXPECT_FALSE(st.on);
    EXPECT_EQ(st.buckets, 0);
    EXPECT_EQ(st.replayed, 0);
    EXPECT_EQ(st.eager, 1);  // the second micro-batch: unpadded
    EXPECT_GT(st.padded_tokens, st.real_tokens);  // the first: padded, then eager
    EXPECT_EQ(backend.refused, 1) << "no capture is tried after one failed";
    const StepResult want = run_two_micro_batches(fx, "reference", false, 7);
    EXPECT_EQ(std::memcmp(got.grad.data(), want.grad.data(), got.grad.size() * 4), 0);
    EXPECT_EQ(std::memcmp(got.metrics.data(), want.metrics.data(), 3 * sizeof(double)), 0);
  }
}

// ---- graphs: the optimizer step with t and lr from device memory ----
//
// A replayed optimizer-step graph reads t and lr from device memory that a
// copy wrote before the replay (Ops::AdamWStep::device, staged from a ring
// of host slots). The CPU cannot capture, so Optimizer::set_step_values_on_device
// enqueues that form eagerly: over the six steps of
// train_golden_optimizer_steps (a warmup and a decay; in f16 a NaN gradient
// at step 4, skipped) it must give the eager run's parameters, moments and
// scaler bit for bit.
TEST(TrainOptimizerGraph, StepValuesOnTheDeviceEqualTheEagerSteps) {
  struct Case {
    const char* model;
    const char* kernels;
    DType dtype;
  };
  for (const Case& k : {Case{"tiny-bert", "reference", DType::f32}, Case{"tiny-bert", "fast", DType::f32},
                        Case{"tiny-bert", "fast", DType::f16}, Case{"tiny-modernbert", "fast", DType::f16}}) {
    SCOPED_TRACE(std::string(k.model) + " " + k.kernels + " " + std::string(dtype_name(k.dtype)));
    const Fixture fx = open_fixture(k.model);
    const auto run = [&](bool on_device) {
      cpu::CpuBackend backend(std::string(k.kernels) == "reference" ? cpu::reference_kernels() : cpu::fast_kernels());
      return train_golden_optimizer_steps(backend, fx, k.dtype,
                                          [&](train::Optimizer& o) { o.set_step_values_on_device(on_device); });
    };
    const GoldenOptimizerRun eager = run(false), device = run(true);
    EXPECT_FALSE(device.stats.on);  // the CPU captures nothing: eager, in the graph's form
    EXPECT_EQ(device.stats.eager, 6);
    EXPECT_EQ(device.stats.replayed, 0);
    expect_same_optimizer_state(device, eager);
    if (k.dtype == DType::f16) {
      const LossScalerState st = loss_scaler_from_slots(device.scaler.data());
      EXPECT_EQ(st.skipped_steps, 1);
      EXPECT_EQ(st.optimizer_steps, 5);
    }
  }
}

// The values the op reads are the ones staged for it: another lr on the
// device moves the parameters (the check above could not pass by reading the
// host's lr).
TEST(TrainOptimizerGraph, TheStagedLrIsTheOneApplied) {
  const Fixture fx = open_fixture("tiny-bert");
  const HfConfig& c = fx.folder.config;
  const ModelWeights weights = open_model_folder_weights(fx.folder);
  cpu::CpuBackend backend(cpu::fast_kernels());
  auto run = [&](double lr) {
    auto enc = load_trainable_encoder(c, c, weights, backend, DType::f32, TrainableInit{}, nullptr);
    train::Optimizer opt(*enc, backend, train::OptimizerOptions{});
    opt.set_step_values_on_device(true);
    const std::vector<float> g(static_cast<size_t>(enc->layout.numel()), 0.01f);
    backend.copy_to_device(enc->grad_data(), g.data(), g.size() * 4);
    opt.step(1, lr);
    std::vector<float> p(g.size());
    backend.copy_to_host(p.data(), enc->master_data(), p.size() * 4);
    backend.synchronize();
    return p;
  };
  const std::vector<float> a = run(1e-3), b = run(2e-3), a2 = run(1e-3);
  EXPECT_EQ(a, a2);
  EXPECT_NE(a, b);
}

// A backend that says it can capture but refuses when asked: the optimizer
// step runs eagerly for good, with the same results.
TEST(TrainOptimizerGraph, AFailedCaptureRunsEagerlyForGood) {
  const Fixture fx = open_fixture("tiny-bert");
  const HfConfig& c = fx.folder.config;
  const ModelWeights weights = open_model_folder_weights(fx.folder);
  std::vector<std::vector<float>> params;
  for (bool refusing : {false, true}) {
    cpu::CpuBackend plain(cpu::reference_kernels());
    RefusingCaptureBackend refuses(cpu::reference_kernels());
    Backend& backend = refusing ? static_cast<Backend&>(refuses) : plain;
    auto enc = load_trainable_encoder(c, c, weights, backend, DType::f32, TrainableInit{}, nullptr);
    train::Optimizer opt(*enc, backend, train::OptimizerOptions{});
    EXPECT_EQ(opt.graph_stats().on, refusing);
    const std::vector<float> g(static_cast<size_t>(enc->layout.numel()), 0.01f);
    for (int64_t t = 1; t <= 3; ++t) {
      backend.copy_to_device(enc->grad_data(), g.data(), g.size() * 4);
      opt.step(t, 1e-3 * static_cast<double>(t));
    }
    params.emplace_back(g.size());
    backend.copy_to_host(params.back().data(), enc->master_data(), g.size() * 4);
    backend.synchronize();
    if (refusing) {
      EXPECT_TRUE(opt.graph_stats().capture_failed);
      EXPECT_FALSE(opt.graph_stats().on);
      EXPECT_EQ(opt.graph_stats().eager, 3);
      EXPECT_EQ(refuses.refused, 1) << "no capture is tried after one failed";
    }
  }
  EXPECT_EQ(params[0], params[1]);
}

// The whole trainer in the graphs' form (TrainerOptions::graph_shapes_without_capture:
// padded micro-batches, the device dropout step, t and lr from device
// memory), reference kernels, six steps of warmup and decay: the eager run's
// parameters bit for bit, its checkpoint-3 byte for byte (weights, moments,
// trainer state); and a run resumed from that checkpoint ends on the same
// bits as the uninterrupted one. In f32, and in f16 with the loss scaler
// growing every second step. (A skipped f16 step in the graphs' form:
// StepValuesOnTheDeviceEqualTheEagerSteps above.)
TEST(TrainOptimizerGraph, TheTrainerInTheGraphsFormEqualsEagerAndResumes) {
  namespace fs = std::filesystem;
  const Fixture fx = open_fixture("tiny-bert");
  const HfConfig& c = fx.folder.config;
  std::vector<train::Example> examples(24);
  std::mt19937 rng(5);
  for (size_t i = 0; i < examples.size(); ++i) {
    const size_t len = 6 + rng() % 30;
    for (size_t t = 0; t < len; ++t) examples[i].ids.push_back(static_cast<int32_t>(100 + rng() % 2000));
    examples[i].type_ids.assign(len, 0);
    examples[i].label = static_cast<int32_t>(i % 2);
  }
  for (const DType dtype : {DType::f32, DType::f16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    train::TrainerOptions o;
    o.max_steps = 6;
    o.batch_size = 8;
    o.lr = 1e-3;
    o.warmup_steps = 2;
    o.log_every = 3;
    o.save_every = 3;
    o.quiet = true;
    o.dropout = DropoutRates{0.1f, 0.1f, 0.1f};
    o.optim.loss_scaling = dtype == DType::f16;
    o.optim.scaler.growth_interval = 2;  // the scale grows at steps 2, 4, 6: a resume must keep its tracker
    train::SaveContext save;
    save.config_json = read_file(fx.folder.model_dir / "config.json");
    struct Run {
      std::vector<float> params;
      train::TrainReport report;
    };
    auto train_run = [&](const fs::path& output, bool graph_form, const fs::path& resume) {
      train::TrainerOptions oo = o;
      oo.output = output;
      oo.graph_shapes_without_capture = graph_form;
      cpu::CpuBackend backend(cpu::reference_kernels());
      const ModelFolder from = resume.empty() ? fx.folder : open_model_folder(resume);
      auto enc = load_trainable_encoder(c, from.config, open_model_folder_weights(from), backend, dtype,
                                        TrainableInit{}, nullptr);
      train::Trainer trainer(*enc, backend, oo, examples, nullptr, false, save);
      if (!resume.empty()) trainer.resume_from(resume);
      Run r;
      r.report = trainer.run();
      EXPECT_EQ(r.report.graphs.padded_tokens > 0, graph_form);
      r.params.resize(static_cast<size_t>(enc->layout.numel()));
      backend.copy_to_host(r.params.data(), enc->master_data(), r.params.size() * 4);
      backend.synchronize();
      return r;
    };
    const std::string name = "optimizer-graph-" + std::string(dtype_name(dtype));
    const fs::path eager_dir = test::scratch_dir(name + "-eager"), dir = test::scratch_dir(name + "-form");
    const Run eager = train_run(eager_dir, false, {});
    const Run graphs = train_run(dir, true, {});
    EXPECT_TRUE(eager.params == graphs.params) << "the graphs' form changed the parameters";
    if (dtype == DType::f16) {
      EXPECT_EQ(graphs.report.scaler.scale, 8.0f * 65536.0f) << "the scale did not grow every 2 steps";
      EXPECT_EQ(graphs.report.scaler.scale, eager.report.scaler.scale);
      EXPECT_EQ(graphs.report.scaler.optimizer_steps, 6);
    }
    // checkpoint-3 of both runs: the same bytes in every file.
    size_t files = 0;
    for (const auto& e : fs::directory_iterator(eager_dir / "checkpoint-3")) {
      if (!e.is_regular_file()) continue;
      ++files;
      EXPECT_TRUE(read_file(e.path()) == read_file(dir / "checkpoint-3" / e.path().filename()))
          << e.path().filename() << " differs";
    }
    EXPECT_GE(files, 3u);
    const fs::path ck = dir / "checkpoint-3";
    ASSERT_TRUE(fs::exists(ck));
    const Run resumed = train_run(dir, true, ck);
    EXPECT_TRUE(resumed.params == graphs.params) << "a resume in the graphs' form changed the parameters";
    EXPECT_EQ(resumed.report.scaler.scale, graphs.report.scaler.scale);
  }
}

// ---- the bucket planning ----
TEST(TrainBuckets, ShapesMapToBuckets) {
  const TrainBucketPlan plan(100000, 64, 512);
  // Tokens: multiples of max(64, 2^floor(log2 T) / 8).
  EXPECT_EQ(plan.bucket_of(1, 1, 1)->tokens, 64);
  EXPECT_EQ(plan.bucket_of(100, 8, 30)->tokens, 128);
  EXPECT_EQ(plan.bucket_of(512, 16, 32)->tokens, 512);
  EXPECT_EQ(plan.bucket_of(513, 16, 33)->tokens, 576);
  EXPECT_EQ(plan.bucket_of(2048, 64, 32)->tokens, 2048);
  EXPECT_EQ(plan.bucket_of(2050, 64, 40)->tokens, 2304);
  EXPECT_EQ(plan.bucket_of(16384, 64, 256)->tokens, 16384);
  EXPECT_FALSE(plan.bucket_of(16385, 64, 256)) << "past kGraphMaxTokens: eager";
  // The longest sequence: a power of two, at least 16, at most the positions.
  EXPECT_EQ(plan.bucket_of(100, 8, 5)->max_seqlen, 16);
  EXPECT_EQ(plan.bucket_of(100, 8, 17)->max_seqlen, 32);
  EXPECT_EQ(plan.bucket_of(900, 3, 300)->max_seqlen, 512);
  EXPECT_FALSE(plan.bucket_of(900, 3, 513)) << "longer than the model's positions";
  // Sequence slots: the workspace's, plus the padding's chunks.
  EXPECT_EQ(plan.bucket_of(2050, 64, 40)->sequences, 64 + (256 - 1 + 63) / 64);
  EXPECT_EQ(plan.bucket_of(100, 8, 30)->sequences, 64 + (64 - 1 + 31) / 32);
  EXPECT_LE(plan.bucket_of(16384, 64, 16)->sequences, plan.max_sequence_slots());
  // Never past the workspace.
  const TrainBucketPlan small(1000, 8, 512);
  EXPECT_EQ(small.bucket_of(990, 8, 128)->tokens, 1000);
  EXPECT_FALSE(small.bucket_of(1001, 8, 128));
  EXPECT_FALSE(small.bucket_of(100, 9, 16)) << "more sequences than the workspace";
  // Micro-batches of one bucket share one shape: the same key.
  EXPECT_EQ(*plan.bucket_of(2050, 64, 40), *plan.bucket_of(2300, 60, 64));
  EXPECT_NE(*plan.bucket_of(2050, 64, 40), *plan.bucket_of(2050, 64, 65));
}

TEST(TrainBuckets, PaddingFormsSequencesOfItsOwn) {
  const TrainBucketPlan plan(100000, 4, 512);
  const TrainBucket b = *plan.bucket_of(20, 3, 11);  // 64 tokens, max_seqlen 16, 4 + 4 slots
  EXPECT_EQ(b.tokens, 64);
  EXPECT_EQ(b.max_seqlen, 16);
  std::vector<int32_t> cu{0, 5, 9, 20};
  TrainBucketPlan::pad_offsets(b, 3, cu);
  const std::vector<int32_t> want{0, 5, 9, 20, 36, 52, 64, 64, 64};
  EXPECT_EQ(cu, want);
  EXPECT_EQ(static_cast<int64_t>(cu.size()), b.sequences + 1);
  // Every micro-batch of every bucket fits its slots (the worst padding: one token past a boundary).
  for (int64_t T = 1; T <= TrainBucketPlan::kGraphMaxTokens; T += 37)
    for (int64_t L : {int64_t{1}, int64_t{16}, int64_t{100}, int64_t{512}}) {
      const int64_t B = std::max<int64_t>(1, std::min<int64_t>(4, (T + L - 1) / L));
      if (B * L < T) continue;  // not a batch of B sequences of at most L
      const auto bucket = plan.bucket_of(T, B, L);
      ASSERT_TRUE(bucket) << T;
      std::vector<int32_t> offsets{0};
      for (int64_t b2 = 0; b2 < B; ++b2)
        offsets.push_back(static_cast<int32_t>(std::min<int64_t>(T, (b2 + 1) * L)));
      offsets.back() = static_cast<int32_t>(T);
      ASSERT_NO_THROW(TrainBucketPlan::pad_offsets(*bucket, B, offsets)) << T << " " << L;
      for (size_t i = 1; i < offsets.size(); ++i) ASSERT_LE(offsets[i] - offsets[i - 1], bucket->max_seqlen);
    }
}

// A real length mix: the first 4,000 multilingual fortunes tokenized by the
// tiny BERT (128 tokens at most), batched as the trainer batches them
// (shuffled, grouped by length), at batch sizes 16 and 64: how many buckets
// (graph pairs) an epoch captures and how much of the enqueued work is padding.
TEST(TrainBuckets, ARealLengthMixMakesFewBucketsAndLittlePadding) {
  const auto tok = load_tokenizer(test::fixture("models/tiny-bert"));
  std::ifstream in(test::fixture("corpus/fortunes-multilingual.jsonl"));
  std::vector<int64_t> lengths;
  std::string line;
  EncodeOptions eo;
  eo.max_length = 128;
  while (lengths.size() < 4000 && std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    lengths.push_back(static_cast<int64_t>(tok->encode(j.at("text").get<std::string>(), eo).ids.size()));
  }
  ASSERT_EQ(lengths.size(), 4000u);
  for (int64_t batch : {int64_t{16}, int64_t{64}}) {
    const auto order = train::epoch_batches(lengths, train::BatchOrderOptions{true, true, batch, 42}, 0);
    std::vector<std::vector<int64_t>> mix;
    for (const auto& b : order) {
      mix.emplace_back();
      for (uint32_t i : b) mix.back().push_back(lengths[i]);
    }
    std::vector<int64_t> sorted = lengths;
    std::sort(sorted.rbegin(), sorted.rend());
    int64_t max_tokens = 0;
    for (int64_t i = 0; i < batch; ++i) max_tokens += sorted[static_cast<size_t>(i)];
    const TrainBucketPlan plan(max_tokens, batch, 512);
    const TrainBucketPlan::MixReport r = plan.plan_mix(mix);
    std::printf("[buckets] batch %lld: %zu micro-batches -> %zu buckets, %lld eager, padding %.1f%% of the tokens\n",
                static_cast<long long>(batch), mix.size(), r.buckets.size(), static_cast<long long>(r.eager_batches),
                100.0 * r.waste());
    EXPECT_EQ(r.eager_batches, 0);
    EXPECT_LE(r.waste(), 0.125);
    EXPECT_LE(r.buckets.size(), 48u);
    EXPECT_LT(r.buckets.size(), mix.size() / 2) << "graphs would rarely replay";
  }
}

// The parameter names a stoke checkpoint is written with are exactly the
// state_dict keys of transformers' AutoModelForSequenceClassification for
// that folder (the goldens' json lists them), so it loads with no missing or
// unexpected keys. GTE: the names transformers 5 itself saves (its
// conversion mapping fuses q/k/v and up/gate on save and splits them on load).
TEST(TrainCheckpointNames, EqualTransformersStateDictKeys) {
  for (const char* model :
       {"tiny-distilbert", "tiny-electra", "tiny-roberta", "tiny-camembert", "tiny-xlmr5", "tiny-mpnet",
        "tiny-modernbert", "tiny-gte", "tiny-nomic"}) {
    const Fixture fx = open_fixture(model);
    const nlohmann::json info =
        nlohmann::json::parse(read_file(repo_golden_dir() / (std::string(model) + ".json")));
    std::set<std::string> want, got;
    const bool fused = std::string(model) == "tiny-gte" || std::string(model) == "tiny-nomic";
    const char* keys = fused ? "safetensors_keys" : "state_dict_keys";
    for (const auto& k : info.at(keys)) want.insert(k.get<std::string>());
    const ParamLayout layout(fx.folder.config);
    for (const ParamSlot& s : layout.slots()) got.insert(s.name);
    EXPECT_EQ(got, want) << model;
  }
}

// RELIABILITY 10 with a real refusal (tests/support/capped_backend.h): a
// device whose largest allocation fits the workspace of 4 examples but not of
// 8 trains with --batch-size 8 as chunks of 4, and lands where the roomy
// device does up to the order of the gradient sums (1e-5 relative per
// tensor; the key biases, rounding noise, 3e-3 absolute). The same examples,
// loss weight and dropout masks: dropout is on. (The CLI tests inject a
// refusal in the middle of a step, and check resume: test_cli_train.)
TEST(TrainerOutOfMemory, ARefusedWorkspaceHalvesTheMicroBatch) {
  const Fixture fx = open_fixture("tiny-bert");
  const HfConfig& c = fx.folder.config;
  const ModelWeights weights = open_model_folder_weights(fx.folder);
  std::vector<train::Example> examples(24);
  std::mt19937 rng(7);
  for (size_t i = 0; i < examples.size(); ++i) {
    const size_t len = 6 + rng() % 40;
    for (size_t t = 0; t < len; ++t) examples[i].ids.push_back(static_cast<int32_t>(100 + rng() % 2000));
    examples[i].type_ids.assign(len, 0);
    examples[i].label = static_cast<int32_t>(i % 3);
  }
  std::vector<int64_t> lengths;
  for (const auto& e : examples) lengths.push_back(static_cast<int64_t>(e.ids.size()));
  train::TrainerOptions o;
  o.output = test::scratch_dir("trainer-oom");
  o.max_steps = 3;
  o.batch_size = 8;
  o.lr = 1e-3;
  o.log_every = 1;
  o.save_every = 0;
  o.quiet = true;
  o.dropout = DropoutRates{0.1f, 0.1f, 0.1f};
  auto train_on = [&](size_t cap, train::TrainReport& report) {
    cpu::CpuBackend cpu(cpu::fast_kernels());
    auto enc = load_trainable_encoder(c, c, weights, cpu, DType::f32, TrainableInit{}, nullptr);
    test::CappedBackend device(cpu, SIZE_MAX);
    train::Trainer trainer(*enc, device, o, examples, nullptr, false, train::SaveContext{});
    device.set_cap(cap);  // the workspace is asked for when the run starts
    report = trainer.run();
    std::vector<float> params(static_cast<size_t>(enc->layout.numel()));
    cpu.copy_to_host(params.data(), enc->master_data(), params.size() * 4);
    cpu.synchronize();
    EXPECT_EQ(device.refused() > 0, cap != SIZE_MAX);
    return params;
  };
  // The workspace's widest buffers: (tokens, max(3H, I)) f32.
  const auto widest = [&](int64_t examples_per_chunk) {
    return static_cast<size_t>(train::workspace_tokens(lengths, examples_per_chunk) *
                               std::max(3 * c.hidden_size, c.intermediate_size) * 4);
  };
  train::TrainReport roomy_report, tight_report;
  const auto roomy = train_on(SIZE_MAX, roomy_report);
  const auto tight = train_on((widest(4) + widest(8)) / 2, tight_report);
  EXPECT_EQ(roomy_report.micro_batch_halvings, 0);
  EXPECT_EQ(roomy_report.micro_batch_examples, 8);
  EXPECT_EQ(tight_report.micro_batch_halvings, 1);
  EXPECT_EQ(tight_report.memory_halvings, 1);
  EXPECT_EQ(tight_report.micro_batch_examples, 4);
  EXPECT_EQ(tight_report.memory_syncs, 0u);  // refused before the first step: nothing to wait for
  EXPECT_EQ(tight_report.samples, roomy_report.samples);
  EXPECT_NEAR(tight_report.last_loss, roomy_report.last_loss, 1e-5 * std::abs(roomy_report.last_loss));
  const ParamLayout layout(c);
  ASSERT_EQ(static_cast<size_t>(layout.numel()), roomy.size());
  for (const ParamSlot& s : layout.slots()) {
    const std::vector<float> a(roomy.begin() + s.offset, roomy.begin() + s.offset + s.numel);
    const std::vector<float> b(tight.begin() + s.offset, tight.begin() + s.offset + s.numel);
    if (s.role == TensorRole::key_bias) {
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 3e-3) << s.name;
      continue;
    }
    EXPECT_LE(relative_error(b, std::vector<double>(a.begin(), a.end())), 1e-5) << s.name;
  }

  // Not even one example's workspace fits: an error that says so.
  train::TrainReport none;
  try {
    train_on(64, none);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::device);
    EXPECT_NE(std::string(e.what()).find("not even one training example fits the device"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace stoke
