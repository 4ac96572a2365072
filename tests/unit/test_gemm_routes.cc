// How the CUDA backend runs every GEMM (src/cuda/gemm_routes.h), checked on
// the CPU: the route table itself, the 16-bit dy chunking, and — the point —
// a real bf16 training step (forward, loss, backward of a bert-base-size and
// of a ModernBERT-size classifier, two layers each: every layer has the same
// GEMMs) recorded op by op on the CPU backend, whose model code is the one
// the GPU runs: no GEMM of it may route to the plain kernel, in bf16 or f16.
// Before the 16-bit dy copy existed, every backward product (f32 dy against
// bf16 weights and activations) did.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cpu/cpu_backend.h"
#include "cpu/kernels.h"
#include "cuda/gemm_routes.h"
#include "io/model_folder.h"
#include "model/encoder_training.h"
#include "model/packed_batch.h"
#include "model/trainable_encoder.h"
#include "support/fixtures.h"
#include "support/random_bert.h"

namespace stoke {
namespace {

using cuda::GemmRoute;

TEST(GemmRoutes, OperandMixesAndTheirPaths) {
  const DType f32 = DType::f32, bf16 = DType::bf16, f16 = DType::f16;
  // One dtype: cuBLASLt, into that dtype or f32.
  for (DType t : {f32, bf16, f16}) {
    EXPECT_EQ(cuda::general_gemm_route(t, t, f32), GemmRoute::cublaslt);
    EXPECT_EQ(cuda::general_gemm_route(t, t, t), GemmRoute::cublaslt);
    EXPECT_EQ(cuda::linear_route(t, t, t), GemmRoute::cublaslt);
    EXPECT_EQ(cuda::linear_route(f32, t, t), GemmRoute::cublaslt);
  }
  // The trainer's backward: f32 dy against 16-bit w / a, f32 or 16-bit out.
  for (DType low : {bf16, f16}) {
    EXPECT_EQ(cuda::general_gemm_route(f32, low, f32), GemmRoute::cublaslt_16bit_copy);
    EXPECT_EQ(cuda::general_gemm_route(low, f32, f32), GemmRoute::cublaslt_16bit_copy);
    EXPECT_EQ(cuda::general_gemm_route(f32, low, low), GemmRoute::cublaslt_16bit_copy);
    EXPECT_EQ(cuda::gemm_copy_dtype(f32, low), low);
    EXPECT_EQ(cuda::gemm_copy_dtype(low, f32), low);
  }
  // What is left for the plain kernel: two different 16-bit types, an
  // output of a third dtype, integers.
  EXPECT_EQ(cuda::general_gemm_route(bf16, f16, f32), GemmRoute::plain);
  EXPECT_EQ(cuda::general_gemm_route(f32, bf16, f16), GemmRoute::plain);
  EXPECT_EQ(cuda::general_gemm_route(bf16, bf16, f16), GemmRoute::plain);
  EXPECT_EQ(cuda::general_gemm_route(DType::i8, DType::i8, DType::i32), GemmRoute::plain);
  EXPECT_EQ(cuda::linear_route(bf16, bf16, f32), GemmRoute::plain);
}

TEST(GemmRoutes, DyChunksFitTheWorkspaceAndKeepAlignment) {
  const size_t ws = size_t{64} << 20;
  EXPECT_EQ(cuda::dy_chunk_rows(ws, 3072, 2), 10752);  // 10922 rows fit: 42 x 256
  EXPECT_EQ(cuda::dy_chunk_rows(ws, 768, 2), 43520);
  EXPECT_EQ(cuda::dy_chunk_rows(1000, 3, 2), 166);   // under 256 rows: as many as fit
  EXPECT_EQ(cuda::dy_chunk_rows(ws, int64_t{1} << 26, 2), 0);  // not one row: the plain kernel
  EXPECT_EQ(cuda::dy_chunk_rows(ws, 0, 2), 0);
}

// ---- a training step, recorded --------------------------------------------------

struct GemmCall {
  std::string what;  // "linear", "linear_backward da", "linear_backward dw"
  int64_t M, N, K;
  DType x, y, out;
};

// Every op forwarded to the wrapped backend's ops.
class ForwardingOps : public Ops {
 public:
  explicit ForwardingOps(const Ops& inner) : inner_(inner) {}
#define STOKE_OP(name, params, args) \
  void name params const override { inner_.name args; }
#include "backend/op_list.h"
#undef STOKE_OP

 protected:
  const Ops& inner_;
};

// ... with the GEMMs recorded on the way.
class RecordingOps final : public ForwardingOps {
 public:
  using ForwardingOps::ForwardingOps;
  void linear(const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias,
              Activation act, Accumulate acc) const override {
    record({"linear", a.dim(0), w.dim(0), a.dim(1), a.dtype, w.dtype, out.dtype});
    inner_.linear(out, a, w, bias, act, acc);
  }
  void linear_backward(const TensorView& da, const TensorView& dw, const TensorView& db, const TensorView& dy,
                       const TensorView& a, const TensorView& w, Accumulate da_acc) const override {
    const int64_t M = dy.dim(0), N = dy.dim(1), K = w.dim(1);
    if (!da.empty()) record({"linear_backward da", M, K, N, dy.dtype, w.dtype, da.dtype});  // [M,N]·[N,K]
    if (!dw.empty()) record({"linear_backward dw", N, K, M, dy.dtype, a.dtype, dw.dtype});  // [N,M]·[M,K]
    inner_.linear_backward(da, dw, db, dy, a, w, da_acc);
  }
  std::vector<GemmCall> calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  void record(GemmCall c) const {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(std::move(c));
  }
  mutable std::mutex mu_;
  mutable std::vector<GemmCall> calls_;
};

// The CPU backend with its ops seen through RecordingOps.
class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(Backend& inner) : inner_(inner), ops_(inner.ops()) {}
  const RecordingOps& recorder() const { return ops_; }

  std::string name() const override { return inner_.name(); }
  bool device_is_host() const override { return inner_.device_is_host(); }
  std::unique_ptr<Buffer> allocate(size_t bytes) override { return inner_.allocate(bytes); }
  std::unique_ptr<Buffer> allocate_host(size_t bytes) override { return inner_.allocate_host(bytes); }
  void copy_to_device(void* d, const void* h, size_t n) override { inner_.copy_to_device(d, h, n); }
  void copy_to_host(void* h, const void* d, size_t n) override { inner_.copy_to_host(h, d, n); }
  std::shared_ptr<Event> record_event() override { return inner_.record_event(); }
  bool event_done(const Event& e) override { return inner_.event_done(e); }
  void wait(const Event& e) override { inner_.wait(e); }
  void throttle(const Event& e) override { inner_.throttle(e); }
  void drain() noexcept override { inner_.drain(); }
  const Ops& ops() const override { return ops_; }
  FreeMemory free_memory() const override { return inner_.free_memory(); }

 private:
  Backend& inner_;
  RecordingOps ops_;
};

// One bf16 micro-batch (forward, loss, backward) of the classifier made from
// `src` with `overrides`, every GEMM it enqueued.
std::vector<GemmCall> training_step_gemms(const std::string& name, const std::filesystem::path& src,
                                          const nlohmann::json& overrides) {
  const auto dir = test::make_random_encoder(test::scratch_dir("gemm-routes-" + name), src, overrides);
  const ModelFolder folder = open_model_folder(dir);
  const HfConfig& c = folder.config;
  const ModelWeights weights = open_model_folder_weights(folder);
  cpu::CpuBackend cpu(cpu::fast_kernels());
  RecordingBackend backend(cpu);
  std::vector<GemmCall> calls;
  {
    auto enc = load_trainable_encoder(c, c, weights, backend, DType::bf16, TrainableInit{}, nullptr);
    auto metrics_buf = backend.allocate(3 * sizeof(double));
    const std::vector<double> zero3(3, 0.0);
    backend.copy_to_device(metrics_buf->data(), zero3.data(), sizeof(double) * 3);
    PackedBatch batch;
    batch.clear();
    std::vector<int32_t> labels;
    for (int32_t len : {7, 33, 20}) {  // ids inside the vocabulary, past the special tokens
      std::vector<int32_t> ids, types(static_cast<size_t>(len), 0);
      for (int32_t i = 0; i < len; ++i) ids.push_back(5 + (i * 37 + len) % static_cast<int32_t>(c.vocab_size - 5));
      batch.add(ids, types, c);
      labels.push_back(len % 2);
    }
    EncoderTrainingRunner runner(*enc, backend, 128, 8);
    runner.set_graphs(false);
    MicroBatchKnobs knobs;
    knobs.loss_scale = 1.0f / 3;
    runner.enqueue(batch, labels, {}, knobs, TensorView(metrics_buf->data(), DType::f64, {3}));
    backend.drain();
    calls = backend.recorder().calls();
  }
  return calls;
}

// Each call's route in bf16 and, with every 16-bit dtype read as f16, in f16
// training (the GPU's other 16-bit precision; the model code is the same).
void expect_no_plain_gemm(const std::vector<GemmCall>& calls, const std::string& model) {
  int backward = 0, mixed = 0;
  std::map<std::string, int> seen, kinds;  // kinds: what, dtypes and route (docs/cuda.md's table)
  for (const GemmCall& g : calls) {
    ++seen[g.what];
    const GemmRoute bf16_route = g.what == "linear" ? cuda::linear_route(g.out, g.x, g.y)
                                                    : cuda::general_gemm_route(g.x, g.y, g.out);
    ++kinds[g.what + " " + std::string(dtype_name(g.x)) + "*" + std::string(dtype_name(g.y)) + "->" +
            std::string(dtype_name(g.out)) + ": " + cuda::gemm_route_name(bf16_route)];
    for (bool as_f16 : {false, true}) {
      auto t = [&](DType d) { return as_f16 && d == DType::bf16 ? DType::f16 : d; };
      const GemmRoute r = g.what == "linear" ? cuda::linear_route(t(g.out), t(g.x), t(g.y))
                                             : cuda::general_gemm_route(t(g.x), t(g.y), t(g.out));
      EXPECT_NE(r, GemmRoute::plain) << model << ": " << g.what << " "
                                     << cuda::gemm_shape_name(g.M, g.N, g.K, t(g.x), t(g.y), t(g.out))
                                     << " would run on the plain kernel";
      if (!as_f16 && r == GemmRoute::cublaslt_16bit_copy) ++mixed;
    }
    if (g.what != "linear") ++backward;
  }
  std::printf("%s, bf16 training step: %zu GEMM calls\n", model.c_str(), calls.size());
  for (const auto& [kind, n] : kinds) std::printf("  %3d x %s\n", n, kind.c_str());
  // The step did run the products this test is about: the layers' forward
  // and both backward products, most of them f32 dy against bf16 operands.
  EXPECT_GE(seen["linear"], 8) << model;
  EXPECT_GE(seen["linear_backward da"], 8) << model;
  EXPECT_GE(seen["linear_backward dw"], 8) << model;
  EXPECT_GE(mixed, backward / 2) << model << ": the step's backward products should meet f32 dy";
}

TEST(GemmRoutes, NoGemmOfABertBaseSizeTrainingStepFallsBack) {
  const auto calls = training_step_gemms("bert-base", test::fixture("models/tiny-bert"),
                                         {{"hidden_size", 768},
                                          {"num_hidden_layers", 2},
                                          {"num_attention_heads", 12},
                                          {"intermediate_size", 3072}});
  expect_no_plain_gemm(calls, "bert-base size");
}

TEST(GemmRoutes, NoGemmOfAModernBertSizeTrainingStepFallsBack) {
  const auto calls = training_step_gemms(
      "modernbert-base", test::source_dir() / "tests/golden/models/tiny-modernbert",
      {{"hidden_size", 768}, {"num_hidden_layers", 2}, {"num_attention_heads", 12}, {"intermediate_size", 1152}});
  expect_no_plain_gemm(calls, "ModernBERT-base size");
}

}  // namespace
}  // namespace stoke
