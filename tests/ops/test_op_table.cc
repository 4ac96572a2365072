// THE OP TABLE: every op of the op list (backend/op_list.h) run on every
// backend present — cpu-ref, cpu (fast kernels) and cuda when a GPU is usable
// — against the reference kernels, from one table of cases. A case makes its
// inputs from its own seed, runs the op through a backend's Ops (uploads,
// the op, downloads), and names each output to compare; the harness runs it
// once on the reference backend and once on the backend under test.
//
// Comparison: data movement (gather_rows, slice_columns, convert) bit for
// bit; everything else by relative error ||got - want|| / ||want|| per output,
// with the tolerance set by the case's precision, as tests/ops/test_ops.cc
// reasons it: f32 max(1e-5, 16 u sqrt(K)) for a reduction of length K
// (u = 2^-24); bf16 2e-2; f16 2e-3. The cpu-ref backend must reproduce the
// reference bit for bit (the same kernels, run again through the executor).
//
// A backend that does not have an op (CUDA lacks some training ops yet:
// kCudaMissingTrainingOps) must refuse it with Error(unsupported) naming the
// op and what to do instead.
// Adding an op: add its case here (EveryOpHasACase fails until then) —
// docs/ops.md. The special-purpose suites stay beside this table: finite
// differences (test_ops_backward), torch's AdamW numbers and the loss
// semantics (test_ops_train), mixed precision (test_ops_mixed), the sweeps
// over awkward sizes (test_ops, test_cuda_ops).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "backend/backend.h"
#include "backend/unsupported_ops.h"
#include "core/error.h"
#include "cpu/cpu_backend.h"
#include "cpu/kernels.h"
#include "model/int8_weights.h"
#include "support/device_tensors.h"
#include "support/host_tensors.h"
#ifdef STOKE_HAVE_CUDA
#include "cuda/cuda_backend.h"
#include "cuda/device.h"
#include "cuda/device_errors.h"
#endif

namespace stoke {
namespace {

using test::DeviceTensors;
using test::host_tensors::get;
using test::host_tensors::HostTensor;
using test::host_tensors::host_tensor;
using test::host_tensors::index_tensor;
using test::host_tensors::random_tensor;
using test::host_tensors::Rng;

// ---- one run of a case on one backend ------------------------------------------

// What a case sees: the backend's ops and tensors on its device; `result`
// marks a device tensor as an output to compare.
struct Run {
  const Ops& ops;
  DeviceTensors& dev;
  std::vector<std::pair<std::string, TensorView>> results;

  TensorView in(const HostTensor& h) { return dev.upload(h); }
  // An output that starts as zeros (parameter gradients and metrics accumulate).
  TensorView out(const std::string& name, DType t, std::vector<int64_t> shape) {
    return result(name, dev.zeros(t, std::move(shape)));
  }
  // An input the op also writes (in place, or accumulating onto it).
  TensorView inout(const std::string& name, const HostTensor& h) { return result(name, dev.upload(h)); }
  TensorView result(const std::string& name, const TensorView& t) {
    results.emplace_back(name, t);
    return t;
  }
};

struct OpCase {
  std::string op;    // its name in the op list
  std::string name;  // unique: op and what varies
  DType precision = DType::f32;  // the activation dtype: sets the tolerance
  int64_t reduction = 0;         // the longest sum an output element is (f32 tolerance)
  bool exact = false;            // data movement: bit for bit
  bool training = false;         // a training op (not on every backend yet)
  bool cpu_only = false;         // an op only the CPU backends have (linear_int8)
  double tol = 0;                // > 0: this case's own bound, reasoned where it is declared
  std::function<void(Run&, Rng&)> run;
};

uint64_t seed_of(const std::string& name) {  // FNV-1a: each case its own stream
  uint64_t h = 1469598103934665603ull;
  for (char ch : name) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  return h;
}

double tolerance(DType precision, int64_t reduction) {
  switch (precision) {
    case DType::bf16: return 2e-2;
    case DType::f16: return 2e-3;
    default: return std::max(1e-5, 16.0 * 0x1.0p-24 * std::sqrt(static_cast<double>(reduction)));
  }
}

const char* dname(DType t) { return t == DType::f32 ? "f32" : t == DType::bf16 ? "bf16" : "f16"; }

HostTensor cu_seqlens(const std::vector<int32_t>& lens) {
  std::vector<int32_t> cu{0};
  for (int32_t n : lens) cu.push_back(cu.back() + n);
  return index_tensor(cu);
}
std::vector<int32_t> draw(Rng& rng, int64_t count, int32_t below) {
  std::vector<int32_t> v;
  for (int64_t i = 0; i < count; ++i) v.push_back(rng.below(below));
  return v;
}

const cpu::Kernels& ref() { return cpu::reference_kernels(); }

// A dropout step in device memory (Ops::DropoutStep: what a replayed
// training graph reads).
HostTensor step_tensor(uint32_t step) {
  HostTensor h = host_tensor(DType::u32, {1});
  std::memcpy(h.view.data, &step, 4);
  return h;
}

// attention_relpos_backward on the packed sequences `lens` (heads x d, rel
// rows for max_len): qkv in `at`, dout and dqkv in `gt`, the forward's out and
// lse from the reference under `dropout`; the op gets `op_dropout` (the same
// mask; its step may be in device memory).
void relpos_backward_case(Run& r, Rng& rng, DType at, DType gt, const std::vector<int32_t>& lens, int heads, int d,
                          int max_len, const Ops::AttentionDropout& dropout, const Ops::AttentionDropout& op_dropout) {
  const int64_t T = std::accumulate(lens.begin(), lens.end(), int64_t{0}), R = 2 * int64_t{max_len} - 1;
  const HostTensor qkv = random_tensor(rng, at, {T, 3 * heads * d}, -2.5, 2.5), cu = cu_seqlens(lens);
  const HostTensor rel = random_tensor(rng, DType::f32, {R, heads}, -2, 2);
  HostTensor out = host_tensor(at, {T, heads * d}), lse = host_tensor(DType::f32, {T, heads});
  ref().attention_relpos_train(out.view, lse.view, qkv.view, cu.view, heads, max_len, rel.view, dropout);
  const TensorView dout = r.in(random_tensor(rng, gt, {T, heads * d}));
  r.ops.attention_relpos_backward(r.out("dqkv", gt, {T, 3 * heads * d}), r.out("drel", DType::f32, {R, heads}), dout,
                                  r.in(qkv), r.in(out), r.in(lse), r.in(cu), heads, max_len, r.in(rel), op_dropout);
}

// ---- the cases: one block per op, in op-list order --------------------------------

std::vector<OpCase> make_cases() {
  std::vector<OpCase> cases;
  auto add = [&](std::string op, std::string what, DType precision, int64_t reduction,
                 std::function<void(Run&, Rng&)> run) -> OpCase& {
    OpCase c;
    c.name = op + "_" + what;
    c.op = std::move(op);
    c.precision = precision;
    c.reduction = reduction;
    c.run = std::move(run);
    cases.push_back(std::move(c));
    return cases.back();
  };
  const DType acts[] = {DType::f32, DType::bf16, DType::f16};
  const std::vector<int32_t> lens = {7, 1, 16};  // uneven sequences, one of length 1
  const int64_t T = 24, B = 3;

  // --- inference
  for (DType at : acts)
    for (Activation act : {Activation::none, Activation::gelu_erf, Activation::tanh, Activation::relu}) {
      const int64_t M = 7, N = 65, K = 129;
      add("linear", std::string(dname(at)) + "_act" + std::to_string(static_cast<int>(act)), at, K,
          [=](Run& r, Rng& rng) {
            const float w_range = std::sqrt(3.0f / K);  // outputs of unit scale
            const TensorView a = r.in(random_tensor(rng, at, {M, K}));
            const TensorView w = r.in(random_tensor(rng, at, {N, K}, -w_range, w_range));
            const TensorView bias = act == Activation::tanh ? TensorView{} : r.in(random_tensor(rng, DType::f32, {N}));
            r.ops.linear(r.out("out", at, {M, N}), a, w, bias, act, Accumulate::no);
          });
    }
  // The residual add folded into the GEMM: out (f32, holding the residual)
  // += a·w^T + bias, for every activation dtype, a bias of either allowed
  // dtype (on CUDA an f32 bias is cuBLASLt's epilogue, a low one our kernel
  // after the GEMM) or none, odd shapes, one row, and K = 0 (out += bias).
  struct AccShape {
    int64_t M, N, K;
  };
  for (DType at : acts)
    for (const AccShape sh : {AccShape{7, 65, 129}, AccShape{1, 33, 70}, AccShape{5, 3, 0}})
      for (int bias_kind = 0; bias_kind < 3; ++bias_kind) {  // none, f32, the activation dtype
        const std::string what = std::string(dname(at)) + "_acc_m" + std::to_string(sh.M) + "n" +
                                 std::to_string(sh.N) + "k" + std::to_string(sh.K) + "_bias" +
                                 std::to_string(bias_kind);
        add("linear", what, at, sh.K, [=](Run& r, Rng& rng) {
          const auto [M, N, K] = sh;
          const float w_range = std::sqrt(3.0f / static_cast<float>(std::max<int64_t>(K, 1)));
          const TensorView a = r.in(random_tensor(rng, at, {M, K}));
          const TensorView w = r.in(random_tensor(rng, at, {N, K}, -w_range, w_range));
          const TensorView bias = bias_kind == 0   ? TensorView{}
                                  : bias_kind == 1 ? r.in(random_tensor(rng, DType::f32, {N}))
                                                   : r.in(random_tensor(rng, at, {N}));
          const TensorView out = r.inout("out", random_tensor(rng, DType::f32, {M, N}, -3, 3));
          r.ops.linear(out, a, w, bias, Activation::none, Accumulate::yes);
        });
      }
  // linear_int8: weights quantized as the loader does (model/int8_weights),
  // activations drawn with a zero row and a row with one huge outlier (its
  // other entries quantize to 0). Exactness of the int32 sums and the
  // non-VNNI code are tested in test_int8_linear.cc; here the fast kernel
  // meets the reference's double dequantization at f32 rounding.
  struct Int8Shape {
    int64_t M, N, K;
    Activation act;
  };
  for (const Int8Shape sh : {Int8Shape{7, 65, 129, Activation::none}, Int8Shape{7, 65, 129, Activation::gelu_erf},
                             Int8Shape{1, 5, 3, Activation::none}, Int8Shape{5, 33, 64, Activation::relu},
                             Int8Shape{4, 3, 70, Activation::tanh}}) {
    // std::string("m"), not "m" + ...: gcc 12 reports a false -Wrestrict for a literal + an rvalue string.
    const std::string what = std::string("m") + std::to_string(sh.M) + "n" + std::to_string(sh.N) + "k" +
                             std::to_string(sh.K) + "_act" + std::to_string(static_cast<int>(sh.act));
    add("linear_int8", what, DType::f32, sh.K, [=](Run& r, Rng& rng) {
         const auto [M, N, K, act] = sh;
         HostTensor a = random_tensor(rng, DType::f32, {M, K});
         if (M > 2) {
           for (int64_t k = 0; k < K; ++k) test::host_tensors::set(a.view, 1 * K + k, 0.0);  // a zero row
           test::host_tensors::set(a.view, 2 * K + K / 2, 1e4);                              // an outlier
         }
         const float w_range = std::sqrt(3.0f / static_cast<float>(K));
         const HostTensor w = random_tensor(rng, DType::f32, {N, K}, -w_range, w_range);
         const QuantizedWeight qw = quantize_per_channel(w.view.as<const float>(), N, K);
         HostTensor wq = test::host_tensors::host_tensor(DType::i8, {N, K});
         std::memcpy(wq.view.data, qw.q.data(), qw.q.size());
         HostTensor meta = test::host_tensors::host_tensor(DType::f32, {2, N});
         std::memcpy(meta.view.data, qw.meta.data(), qw.meta.size() * sizeof(float));
         const TensorView bias = act == Activation::tanh ? TensorView{} : r.in(random_tensor(rng, DType::f32, {N}));
         r.ops.linear_int8(r.out("out", DType::f32, {M, N}), r.in(a), r.in(wq), r.in(meta), bias, act);
       }).cpu_only = true;
  }
  // maxsim (ColBERT scores): one query's vectors against documents of 5, 0
  // (scores 0), 1, 33 and 7 vectors at a fixture width, and against long and
  // short documents at a real model's width (128).
  struct MaxsimCase {
    std::string what;
    int64_t Tq, D;
    std::vector<int32_t> dl;  // each document's vector count
  };
  for (const MaxsimCase& c : {MaxsimCase{"d16", 32, 16, {5, 0, 1, 33, 7}}, MaxsimCase{"d128", 32, 128, {180, 1, 64}}}) {
    // Named copies, not structured bindings: clang before 16 cannot capture those.
    const int64_t Tq = c.Tq, D = c.D;
    const std::vector<int32_t> dl = c.dl;
    add("maxsim", c.what, DType::f32, Tq * D, [=](Run& r, Rng& rng) {
      const int64_t Td = std::accumulate(dl.begin(), dl.end(), int64_t{0});
      const int64_t N = static_cast<int64_t>(dl.size());
      const TensorView q = r.in(random_tensor(rng, DType::f32, {Tq, D}));
      const TensorView docs = r.in(random_tensor(rng, DType::f32, {Td, D}));
      r.ops.maxsim(r.out("scores", DType::f32, {N}), q, docs, r.in(cu_seqlens(dl)));
    });
  }
  // The embedding tables and LayerNorm parameters, drawn the same way by
  // every LayerNorm case.
  struct Embeddings {
    HostTensor ids, positions, type_ids, word, pos, type, gamma, beta;
  };
  // tokens: T unless given; TV: the type table's rows.
  auto embeddings = [T](Rng& rng, DType wt, int64_t H, int64_t tokens = 0, int32_t TV = 2) {
    const int32_t V = 50, P = 40;
    const int64_t n = tokens ? tokens : T;
    return Embeddings{index_tensor(draw(rng, n, V)),
                      index_tensor(draw(rng, n, P)),
                      index_tensor(draw(rng, n, TV)),
                      random_tensor(rng, wt, {V, H}),
                      random_tensor(rng, wt, {P, H}, -0.3, 0.3),
                      random_tensor(rng, wt, {TV, H}, -0.2, 0.2),
                      random_tensor(rng, wt, {H}, 0.5, 1.5),
                      random_tensor(rng, wt, {H}, -0.5, 0.5)};
  };
  const int64_t H = 63;
  for (DType at : acts) {
    add("embed_layernorm", dname(at), at, 0, [=](Run& r, Rng& rng) {
      const Embeddings e = embeddings(rng, DType::f32, H);
      r.ops.embed_layernorm(r.out("out", at, {T, H}), r.in(e.ids), r.in(e.positions), r.in(e.type_ids),
                            r.in(e.word), r.in(e.pos), r.in(e.type), r.in(e.gamma), r.in(e.beta), 1e-12f,
                            TensorView{});
    });
    add("residual_layernorm", dname(at), at, 0, [=](Run& r, Rng& rng) {
      const TensorView x = r.in(random_tensor(rng, at, {T, H}, -2, 3));
      const TensorView res = r.in(random_tensor(rng, at, {T, H}));
      const TensorView gamma = r.in(random_tensor(rng, DType::f32, {H}, 0.5, 1.5));
      const TensorView beta = r.in(random_tensor(rng, DType::f32, {H}, -0.5, 0.5));
      r.ops.residual_layernorm(r.out("out", at, {T, H}), x, res, gamma, beta, 1e-5f, TensorView{});
    });
    // No residual (the stream after an accumulating linear already holds the
    // sum), with the compute-dtype copy an f32 stream writes for the next GEMM.
    add("residual_layernorm", std::string(dname(at)) + "_no_residual", at, 0, [=](Run& r, Rng& rng) {
      const TensorView x = r.in(random_tensor(rng, at, {T, H}, -2, 3));
      const TensorView gamma = r.in(random_tensor(rng, DType::f32, {H}, 0.5, 1.5));
      const TensorView beta = r.in(random_tensor(rng, DType::f32, {H}, -0.5, 0.5));
      const TensorView low = at == DType::f32 ? r.out("out_low", DType::bf16, {T, H}) : TensorView{};
      r.ops.residual_layernorm(r.out("out", at, {T, H}), x, TensorView{}, gamma, beta, 1e-5f, low);
    });
    add("bias_gelu", dname(at), at, 0, [=](Run& r, Rng& rng) {
      const TensorView x = r.inout("x", random_tensor(rng, at, {T, 65}, -6, 6));
      r.ops.bias_gelu(x, r.in(random_tensor(rng, DType::f32, {65})));
    });
    add("attention", dname(at), at, 16, [=](Run& r, Rng& rng) {
      const int heads = 2, d = 16;
      const TensorView qkv = r.in(random_tensor(rng, at, {T, 3 * heads * d}, -2.5, 2.5));
      r.ops.attention(r.out("out", at, {T, heads * d}), qkv, r.in(cu_seqlens(lens)), heads, 16, 0);
    });
    // Sliding-window (local) attention, ModernBERT's local layers: a window
    // narrower than the long sequences and wider than the short ones, lengths
    // across the kernels' key tiles (16 / 64) and the CPU's 256-query items,
    // head dim 24 (padded on every backend).
    for (int window : {5, 40})
      add("attention", std::string(dname(at)) + "_window" + std::to_string(window), at, 2 * window + 1,
          [=](Run& r, Rng& rng) {
            const std::vector<int32_t> wl = {70, 3, 300, 1, 41};
            const int64_t wt = 415;
            const int heads = 2, d = 24;
            const TensorView qkv = r.in(random_tensor(rng, at, {wt, 3 * heads * d}, -2.5, 2.5));
            r.ops.attention(r.out("out", at, {wt, heads * d}), qkv, r.in(cu_seqlens(wl)), heads, 300, window);
          });
    // attention_keys (PyLate's unattended query expansion): keys a prefix of
    // each sequence — one key, a few, most, all — every token a query; lengths
    // across the key tiles and the CPU's 256-query items; global and a window
    // every query still reaches a key through.
    for (int window : {0, 40})
      add("attention_keys", std::string(dname(at)) + "_window" + std::to_string(window), at, 300,
          [=](Run& r, Rng& rng) {
            const std::vector<int32_t> wl = {70, 3, 300, 1, 41, 0, 32};
            const std::vector<int32_t> keys = {40, 3, 280, 1, 1, 0, 9};
            const int64_t wt = 447;
            const int heads = 2, d = 24;
            const TensorView qkv = r.in(random_tensor(rng, at, {wt, 3 * heads * d}, -2.5, 2.5));
            r.ops.attention_keys(r.out("out", at, {wt, heads * d}), qkv, r.in(cu_seqlens(wl)), r.in(index_tensor(keys)),
                                 heads, 300, window);
          });
    for (Pooling mode : {Pooling::cls, Pooling::mean, Pooling::max, Pooling::mean_sqrt_len,
                             Pooling::lasttoken})
      add("pool", std::string(dname(at)) + "_mode" + std::to_string(static_cast<int>(mode)), at, 16,
          [=](Run& r, Rng& rng) {
            const TensorView h = r.in(random_tensor(rng, at, {T, H}));
            r.ops.pool(r.out("out", DType::f32, {B, H}), h, r.in(cu_seqlens(lens)), mode);
          });
  }
  // SPLADE's pooling, on logits like a trained MLM head's: most far below 0
  // (around -7), a few ids per token clearly positive, some just above or
  // below 0. A vocabulary of two column tiles and a remainder (the fast
  // kernel's 512), sequences of 7, 1 and 16 tokens; whole batches with rows
  // past the last sequence (a graph's padding, read by nothing), and blocks
  // of rows cut across sequences that combine into what earlier blocks wrote.
  {
    const int64_t V = 1037;
    auto mlm_logits = [](Rng& rng, int64_t rows, int64_t V) {
      HostTensor x = random_tensor(rng, DType::f32, {rows, V}, -10.0, -4.0);
      for (int64_t t = 0; t < rows; ++t)
        for (int k = 0; k < 6; ++k) {
          const int64_t v = rng.below(static_cast<int32_t>(V));
          test::host_tensors::set(x.view, t * V + v, k < 4 ? 0.5 + 7.5 * (rng.below(1000) / 1000.0)
                                                           : (rng.below(1000) - 500) / 1e4);
        }
      return x;
    };
    for (bool sum : {false, true})
      for (int log1p_count : {1, 2}) {
        const std::string what = std::string(sum ? "sum" : "max") + (log1p_count == 2 ? "_log1p_relu" : "_relu");
        add("splade_pool", what + "_whole_batch", DType::f32, 16, [=](Run& r, Rng& rng) {
          Ops::SpladePool p;
          p.sum = sum;
          p.log1p_count = log1p_count;
          r.ops.splade_pool(r.out("out", DType::f32, {B, V}), r.in(mlm_logits(rng, T + 4, V)), r.in(cu_seqlens(lens)), p);
        });
        // Rows 5..14 of the batch (the end of sequence 0, all of 1, the start
        // of 2) onto an out that earlier blocks filled.
        add("splade_pool", what + "_block_accumulates", DType::f32, 16, [=](Run& r, Rng& rng) {
          Ops::SpladePool p;
          p.sum = sum;
          p.log1p_count = log1p_count;
          p.first_row = 5;
          p.acc = Accumulate::yes;
          const TensorView out = r.inout("out", random_tensor(rng, DType::f32, {B, V}, 0.0, 2.0));
          r.ops.splade_pool(out, r.in(mlm_logits(rng, 10, V)), r.in(cu_seqlens(lens)), p);
        });
      }
  }
  add("l2_normalize", "f32", DType::f32, 65, [=](Run& r, Rng& rng) {
    r.ops.l2_normalize(r.inout("x", random_tensor(rng, DType::f32, {5, 65})));
  });

  // --- activations of trained models (f32). Trained encoders have hidden
  // states with means in the hundreds and little spread, a few dimensions
  // far larger than the rest, nearly constant rows, and texts with long runs
  // of one token (identical keys, values and rows, the relative bias the same
  // across a bucket's distances) — inputs the random cases above never make,
  // on which f32 loses digits in two ways: a mean rounded to f32 and then
  // subtracted (its error, u |mean|, is a shift of every centred value:
  // relative u |mean| / spread), and a long serial sum of near-equal terms,
  // whose roundings line up instead of cancelling (error ~ length x u, not
  // sqrt(length) x u). A sound f32 kernel (a corrected mean, sums blocked or
  // carried in double) stays within a few units in the last place whatever
  // the mean or the length, so these cases hold every backend to 32 u =
  // 1.9e-6 (u = 2^-24), where the table's length-scaled bound would allow
  // 16 u sqrt(1500) = 3.7e-5 and hide exactly this.
  constexpr double kTrainedTol = 32.0 * 0x1.0p-24;
  {
    const int64_t TT = 24, HW = 771;  // rows, a width of 48 whole vectors of 16 and a tail
    struct LnRows {
      const char* what;
      double lo, hi, res;  // x ~ U(lo, hi), residual ~ U(-res, res)
    };
    const LnRows ln_rows[] = {{"large_mean", 299.99, 300.01, 0.01},  // mean 300, spread 0.01
                              {"large_mean_3000", 2999.0, 3001.0, 1.0},
                              {"near_constant", -2.5, -2.5 + 1e-4, 0.0}};  // variance far below eps
    for (const LnRows& lr : ln_rows) {
      add("residual_layernorm", std::string("f32_") + lr.what, DType::f32, 0, [=](Run& r, Rng& rng) {
        const TensorView x = r.in(random_tensor(rng, DType::f32, {TT, HW}, lr.lo, lr.hi));
        const TensorView res = r.in(random_tensor(rng, DType::f32, {TT, HW}, -lr.res, lr.res));
        const TensorView gamma = r.in(random_tensor(rng, DType::f32, {HW}, 0.5, 1.5));
        const TensorView beta = r.in(random_tensor(rng, DType::f32, {HW}, -0.5, 0.5));
        r.ops.residual_layernorm(r.out("out", DType::f32, {TT, HW}), x, res, gamma, beta, 1e-5f, TensorView{});
      }).tol = kTrainedTol;
      OpCase& ln_train = add("residual_layernorm_train", std::string("f32_") + lr.what, DType::f32, 0,
                             [=](Run& r, Rng& rng) {
        const TensorView x = r.in(random_tensor(rng, DType::f32, {TT, HW}, lr.lo, lr.hi));
        const TensorView res = r.in(random_tensor(rng, DType::f32, {TT, HW}, -lr.res, lr.res));
        const TensorView gamma = r.in(random_tensor(rng, DType::f32, {HW}, 0.5, 1.5));
        const TensorView beta = r.in(random_tensor(rng, DType::f32, {HW}, -0.5, 0.5));
        r.ops.residual_layernorm_train(r.out("out", DType::f32, {TT, HW}), r.out("mean", DType::f32, {TT}),
                                       r.out("rstd", DType::f32, {TT}), x, res, gamma, beta, 1e-5f);
      });
      ln_train.training = true;
      ln_train.tol = kTrainedTol;
    }
    // A few dimensions far larger than the rest (the "outlier dimensions"
    // of trained BERTs): they set the mean and the spread.
    add("residual_layernorm", "f32_wide_range", DType::f32, 0, [=](Run& r, Rng& rng) {
      HostTensor x = random_tensor(rng, DType::f32, {TT, HW});
      for (int64_t t = 0; t < TT; ++t) {
        test::host_tensors::set(x.view, t * HW + 5, 1e4);
        test::host_tensors::set(x.view, t * HW + 77, -3e3);
      }
      const TensorView gamma = r.in(random_tensor(rng, DType::f32, {HW}, 0.5, 1.5));
      const TensorView beta = r.in(random_tensor(rng, DType::f32, {HW}, -0.5, 0.5));
      r.ops.residual_layernorm(r.out("out", DType::f32, {TT, HW}), r.in(x), TensorView{}, gamma, beta, 1e-5f,
                               TensorView{});
    }).tol = kTrainedTol;
    // The embedding sum with a large mean: word rows at 300 +- 0.01, small
    // position and type rows.
    auto large_embeddings = [=](Rng& rng) {
      const int32_t V = 50, P = 40;
      return Embeddings{index_tensor(draw(rng, TT, V)),
                        index_tensor(draw(rng, TT, P)),
                        index_tensor(draw(rng, TT, 2)),
                        random_tensor(rng, DType::f32, {V, HW}, 299.99, 300.01),
                        random_tensor(rng, DType::f32, {P, HW}, -0.003, 0.003),
                        random_tensor(rng, DType::f32, {2, HW}, -0.002, 0.002),
                        random_tensor(rng, DType::f32, {HW}, 0.5, 1.5),
                        random_tensor(rng, DType::f32, {HW}, -0.5, 0.5)};
    };
    add("embed_layernorm", "f32_large_mean", DType::f32, 0, [=](Run& r, Rng& rng) {
      const Embeddings e = large_embeddings(rng);
      r.ops.embed_layernorm(r.out("out", DType::f32, {TT, HW}), r.in(e.ids), r.in(e.positions), r.in(e.type_ids),
                            r.in(e.word), r.in(e.pos), r.in(e.type), r.in(e.gamma), r.in(e.beta), 1e-12f,
                            TensorView{});
    }).tol = kTrainedTol;
    OpCase& embed_train = add("embed_layernorm_train", "f32_large_mean", DType::f32, 0, [=](Run& r, Rng& rng) {
      const Embeddings e = large_embeddings(rng);
      r.ops.embed_layernorm_train(r.out("out", DType::f32, {TT, HW}), r.out("mean", DType::f32, {TT}),
                                  r.out("rstd", DType::f32, {TT}), r.in(e.ids), r.in(e.positions), r.in(e.type_ids),
                                  r.in(e.word), r.in(e.pos), r.in(e.type), r.in(e.gamma), r.in(e.beta), 1e-12f);
    });
    embed_train.training = true;
    embed_train.tol = kTrainedTol;
  }
  {
    // A run of one token: a long sequence (1500) and a short one (7), all
    // rows of a sequence alike (its own key, value and pooled row), queries
    // random. With the relative bias 0 at distance 0 and -0.1 at every other
    // distance, each row's weights are 1 and e^-0.1 (many times over): every
    // output row is its sequence's value row, exactly, and any error is the
    // sums' own. Head dim 24 (a whole vector and a part), values 300 +- 1.
    const std::vector<int32_t> run_lens = {1500, 7};
    const int64_t RT = 1507;
    const int heads = 2, d = 24, max_len = 1500;
    // Columns [c0, c1) of x alike within each sequence, each column's value drawn from U(lo, hi).
    auto alike_rows = [=](Rng& rng, HostTensor& x, int64_t c0, int64_t c1, double lo, double hi) {
      const int64_t width = x.view.dim(1);
      int64_t first = 0;
      for (int32_t len : run_lens) {
        for (int64_t c = c0; c < c1; ++c) {
          const double v = rng.uniform(lo, hi);
          for (int64_t t = first; t < first + len; ++t) test::host_tensors::set(x.view, t * width + c, v);
        }
        first += len;
      }
    };
    auto step_bias = [=]() {  // rel [2 max_len - 1, heads]: -0.1, and 0 at distance 0
      HostTensor rel = host_tensor(DType::f32, {2 * max_len - 1, heads});
      for (int64_t i = 0; i < rel.view.numel(); ++i) test::host_tensors::set(rel.view, i, -0.1);
      for (int h = 0; h < heads; ++h) test::host_tensors::set(rel.view, (max_len - 1) * heads + h, 0.0);
      return rel;
    };
    // qkv: q columns random, k columns alike in a sequence (U(-1, 1)), v alike (U(299, 301)).
    auto run_qkv = [=](Rng& rng) {
      HostTensor qkv = random_tensor(rng, DType::f32, {RT, 3 * heads * d});
      alike_rows(rng, qkv, heads * d, 2 * heads * d, -1, 1);
      alike_rows(rng, qkv, 2 * heads * d, 3 * heads * d, 299, 301);
      return qkv;
    };
    add("attention_relpos", "f32_repeated_token", DType::f32, max_len, [=](Run& r, Rng& rng) {
      const TensorView qkv = r.in(run_qkv(rng));
      r.ops.attention_relpos(r.out("out", DType::f32, {RT, heads * d}), qkv, r.in(cu_seqlens(run_lens)), heads,
                             max_len, r.in(step_bias()));
    }).tol = kTrainedTol;
    OpCase& relpos_train = add("attention_relpos_train", "f32_repeated_token", DType::f32, max_len,
                               [=](Run& r, Rng& rng) {
      const TensorView qkv = r.in(run_qkv(rng));
      r.ops.attention_relpos_train(r.out("out", DType::f32, {RT, heads * d}), r.out("lse", DType::f32, {RT, heads}),
                                   qkv, r.in(cu_seqlens(run_lens)), heads, max_len, r.in(step_bias()),
                                   Ops::AttentionDropout{});
    });
    relpos_train.training = true;
    relpos_train.tol = kTrainedTol;
    // Without a bias, alike keys would make every weight 1 and the sums
    // exact: here the run alternates two tokens (every other key row + 0.5),
    // so each row's weights take two values, many times over.
    add("attention", "f32_repeated_token", DType::f32, max_len, [=](Run& r, Rng& rng) {
      HostTensor qkv = run_qkv(rng);
      for (int64_t t = 1; t < RT; t += 2)
        for (int64_t c = heads * d; c < 2 * heads * d; ++c)
          test::host_tensors::set(qkv.view, t * 3 * heads * d + c,
                                  test::host_tensors::get(qkv.view, t * 3 * heads * d + c) + 0.5);
      r.ops.attention(r.out("out", DType::f32, {RT, heads * d}), r.in(qkv), r.in(cu_seqlens(run_lens)), heads, max_len,
                      0);
    }).tol = kTrainedTol;
    for (Pooling mode : {Pooling::mean, Pooling::mean_sqrt_len})
      add("pool", "f32_repeated_rows_mode" + std::to_string(static_cast<int>(mode)), DType::f32, max_len,
          [=](Run& r, Rng& rng) {
            HostTensor h = host_tensor(DType::f32, {RT, 771});
            alike_rows(rng, h, 0, 771, 299, 301);
            r.ops.pool(r.out("out", DType::f32, {2, 771}), r.in(h), r.in(cu_seqlens(run_lens)), mode);
          }).tol = kTrainedTol;
  }
  for (DType at : acts) {
    add("gather_rows", dname(at), at, 0, [=](Run& r, Rng& rng) {
      const TensorView h = r.in(random_tensor(rng, at, {T, H}));
      r.ops.gather_rows(r.out("out", at, {5, H}), h, r.in(index_tensor({0, 7, 8, 23, 7})));
    }).exact = true;
    add("slice_columns", dname(at), at, 0, [=](Run& r, Rng& rng) {
      const TensorView in = r.in(random_tensor(rng, at, {5, H}));
      r.ops.slice_columns(r.out("out", at, {5, 17}), in);
    }).exact = true;
    for (DType to : acts)
      if (to != at)
        add("convert", std::string(dname(at)) + "_to_" + dname(to), to, 0, [=](Run& r, Rng& rng) {
          // Large magnitudes inside every dtype's range (f16 ends at 65504): the rounding, not overflow.
          const TensorView in = r.in(random_tensor(rng, at, {T, H}, -60000, 60000));
          r.ops.convert(r.out("out", to, {T, H}), in);
        }).exact = true;
  }

  // --- rotary position embedding: a GQA-shaped qkv row (6 query, 2 key, 2
  // value heads; the rotation covers the first 8 blocks), an odd head_dim
  // with partial rotary, both pair layouts, a scale; long positions (the
  // frequencies reach 1, so angles run to 15 rad).
  struct RopeCase {
    const char* what;
    int heads, head_dim, half;  // rotated blocks, their width, rotated pairs per block
    int64_t columns;
    bool interleaved;
    float scale;
  };
  const RopeCase ropes[] = {{"neox", 8, 12, 6, 10 * 12, false, 1.0f},
                            {"interleaved", 8, 12, 6, 10 * 12, true, 1.0f},
                            {"partial_odd", 3, 13, 4, 4 * 13, false, 1.0f},
                            {"scaled", 2, 8, 4, 16, true, 0.75f}};
  auto rope_freq = [](int half) {
    HostTensor f = host_tensor(DType::f32, {half});
    for (int i = 0; i < half; ++i) f.view.as<float>()[i] = static_cast<float>(std::pow(500.0, -double(i) / half));
    return f;
  };
  for (DType at : acts)
    for (const RopeCase& rc : ropes) {
      const Ops::Rotary rope{rc.heads, rc.head_dim, rc.interleaved, rc.scale};
      add("rotary", std::string(dname(at)) + "_" + rc.what, at, 0, [=](Run& r, Rng& rng) {
        const TensorView x = r.inout("x", random_tensor(rng, at, {T, rc.columns}));
        r.ops.rotary(x, r.in(cu_seqlens(lens)), r.in(rope_freq(rc.half)), rope);
      });
      add("rotary_backward", std::string(dname(at)) + "_" + rc.what, at, 0, [=](Run& r, Rng& rng) {
        const TensorView dx = r.inout("dx", random_tensor(rng, at, {T, rc.columns}));
        r.ops.rotary_backward(dx, r.in(cu_seqlens(lens)), r.in(rope_freq(rc.half)), rope);
      }).training = true;
    }

  // --- gated MLPs: both activations, both half orders, an odd width; the
  // backward also in place (dx = x) and into f32.
  for (DType at : acts)
    for (Ops::Glu::Act act : {Ops::Glu::Act::silu, Ops::Glu::Act::gelu_erf})
      for (bool second : {false, true}) {
        const Ops::Glu glu{act, second};
        const std::string what = std::string(dname(at)) + (act == Ops::Glu::Act::silu ? "_silu" : "_gelu") +
                                 (second ? "_act_second" : "_act_first");
        add("glu", what, at, 0, [=](Run& r, Rng& rng) {
          const TensorView x = r.in(random_tensor(rng, at, {T, 2 * 37}, -6, 6));
          r.ops.glu(r.out("out", at, {T, 37}), x, glu);
        });
        add("glu_backward", what, at, 0, [=](Run& r, Rng& rng) {
          const TensorView x = r.in(random_tensor(rng, at, {T, 2 * 37}, -6, 6));
          const TensorView dout = r.in(random_tensor(rng, at, {T, 37}));
          r.ops.glu_backward(r.out("dx", at, {T, 2 * 37}), dout, x, glu);
        }).training = true;
        if (at != DType::f16)
          add("glu_backward", what + "_in_place_and_f32", at, 0, [=](Run& r, Rng& rng) {
            const HostTensor xh = random_tensor(rng, at, {T, 2 * 37}, -6, 6);
            const TensorView dout = r.in(random_tensor(rng, at, {T, 37}));
            const TensorView x = r.inout("dx_in_place", xh);
            r.ops.glu_backward(r.out("dx_f32", DType::f32, {T, 2 * 37}), dout, x, glu);
            r.ops.glu_backward(x, dout, x, glu);
          }).training = true;
        if (at != DType::f32)  // a trainer's f32 gradient of a low-precision forward
          add("glu_backward", what + "_f32_dout", at, 0, [=](Run& r, Rng& rng) {
            const TensorView x = r.in(random_tensor(rng, at, {T, 2 * 37}, -6, 6));
            const TensorView dout = r.in(random_tensor(rng, DType::f32, {T, 37}));
            r.ops.glu_backward(r.out("dx", DType::f32, {T, 2 * 37}), dout, x, glu);
          }).training = true;
      }

  // --- training: forward variants that keep what backward needs, and backward ops
  auto train = [&](std::string op, std::string what, DType precision, int64_t reduction,
                   std::function<void(Run&, Rng&)> run) -> OpCase& {
    OpCase& c = add(std::move(op), std::move(what), precision, reduction, std::move(run));
    c.training = true;
    return c;
  };
  for (DType at : acts) {  // f16 too: f16 training (the dynamic loss scale) runs these in f16
    const std::string dt = dname(at);
    train("linear_backward", dt, at, 65, [=](Run& r, Rng& rng) {
      const int64_t M = 24, N = 33, K = 65;
      const TensorView a = r.in(random_tensor(rng, at, {M, K})), w = r.in(random_tensor(rng, at, {N, K}, -0.2, 0.2));
      const TensorView dy = r.in(random_tensor(rng, at, {M, N}));
      r.ops.linear_backward(r.out("da", at, {M, K}), r.inout("dw", random_tensor(rng, DType::f32, {N, K})),
                            r.inout("db", random_tensor(rng, DType::f32, {N})), dy, a, w, Accumulate::no);
    });
    // da (f32, holding the residual path's gradient) += dy·w: the post-LN
    // backward's folded add. Odd shapes, one row; da alone and with dw, db.
    for (const AccShape sh : {AccShape{24, 33, 65}, AccShape{1, 70, 17}, AccShape{9, 0, 5}})
      train("linear_backward",
            dt + "_acc_m" + std::to_string(sh.M) + "n" + std::to_string(sh.N) + "k" + std::to_string(sh.K), at,
            std::max<int64_t>(sh.N, 1), [=](Run& r, Rng& rng) {
              const auto [M, N, K] = sh;
              const TensorView a = r.in(random_tensor(rng, at, {M, K}));
              const TensorView w = r.in(random_tensor(rng, at, {N, K}, -0.2, 0.2));
              const TensorView dy = r.in(random_tensor(rng, at, {M, N}));
              const TensorView da = r.inout("da", random_tensor(rng, DType::f32, {M, K}, -2, 2));
              if (M == 1) {  // da alone
                r.ops.linear_backward(da, TensorView{}, TensorView{}, dy, a, w, Accumulate::yes);
              } else {
                r.ops.linear_backward(da, r.inout("dw", random_tensor(rng, DType::f32, {N, K})),
                                      r.inout("db", random_tensor(rng, DType::f32, {N})), dy, a, w, Accumulate::yes);
              }
            });
    // The trainer's own mix: f32 dy (and f32 da, dw, db) against 16-bit a
    // and w — on CUDA dy is rounded to 16 bits for cuBLASLt (gemm_routes.h),
    // on the CPU too where it multiplies bf16 natively.
    if (at != DType::f32)
      train("linear_backward", dt + "_f32_dy", at, 65, [=](Run& r, Rng& rng) {
        const int64_t M = 40, N = 33, K = 65;
        const TensorView a = r.in(random_tensor(rng, at, {M, K})), w = r.in(random_tensor(rng, at, {N, K}, -0.2, 0.2));
        const TensorView dy = r.in(random_tensor(rng, DType::f32, {M, N}));
        r.ops.linear_backward(r.inout("da", random_tensor(rng, DType::f32, {M, K}, -2, 2)),
                              r.inout("dw", random_tensor(rng, DType::f32, {N, K})),
                              r.inout("db", random_tensor(rng, DType::f32, {N})), dy, a, w, Accumulate::yes);
      });
    train("residual_layernorm_train", dt, at, 0, [=](Run& r, Rng& rng) {
      const TensorView x = r.in(random_tensor(rng, at, {T, H}, -2, 3)), res = r.in(random_tensor(rng, at, {T, H}));
      const TensorView gamma = r.in(random_tensor(rng, DType::f32, {H}, 0.5, 1.5));
      const TensorView beta = r.in(random_tensor(rng, DType::f32, {H}, -0.5, 0.5));
      r.ops.residual_layernorm_train(r.out("out", at, {T, H}), r.out("mean", DType::f32, {T}),
                                     r.out("rstd", DType::f32, {T}), x, res, gamma, beta, 1e-5f);
    });
    // T rows, and 700 (the CUDA column sums of dgamma and dbeta in several chunks).
    for (const int64_t rows : {T, int64_t{700}})
      train("layernorm_backward", rows == T ? dt : dt + "_tall", at, rows, [=](Run& r, Rng& rng) {
        // The forward's statistics from the reference, so backward sees a consistent row.
        const HostTensor x = random_tensor(rng, at, {rows, H}, -2, 3), res = random_tensor(rng, at, {rows, H});
        const HostTensor gamma = random_tensor(rng, at, {H}, 0.5, 1.5), beta = random_tensor(rng, at, {H});
        HostTensor y = host_tensor(at, {rows, H}), mean = host_tensor(DType::f32, {rows}),
                   rstd = host_tensor(DType::f32, {rows});
        ref().residual_layernorm_train(y.view, mean.view, rstd.view, x.view, res.view, gamma.view, beta.view, 1e-5f);
        const TensorView dy = r.in(random_tensor(rng, at, {rows, H}));
        r.ops.layernorm_backward(r.out("dx", at, {rows, H}), r.inout("dgamma", random_tensor(rng, DType::f32, {H})),
                                 r.inout("dbeta", random_tensor(rng, DType::f32, {H})), dy, r.in(x), r.in(res),
                                 r.in(mean), r.in(rstd), r.in(gamma), Accumulate::no);
      });
    // Rows wider than 1024 (the CUDA kernels' block-per-row path; narrower rows take a warp each).
    train("residual_layernorm_train", dt + "_wide", at, 0, [=](Run& r, Rng& rng) {
      const int64_t W = 1100;
      const TensorView x = r.in(random_tensor(rng, at, {5, W}, -2, 3)), res = r.in(random_tensor(rng, at, {5, W}));
      const TensorView gamma = r.in(random_tensor(rng, DType::f32, {W}, 0.5, 1.5));
      const TensorView beta = r.in(random_tensor(rng, DType::f32, {W}, -0.5, 0.5));
      r.ops.residual_layernorm_train(r.out("out", at, {5, W}), r.out("mean", DType::f32, {5}),
                                     r.out("rstd", DType::f32, {5}), x, res, gamma, beta, 1e-5f);
    });
    train("layernorm_backward", dt + "_wide", at, 5, [=](Run& r, Rng& rng) {
      const int64_t W = 1100;
      const HostTensor x = random_tensor(rng, at, {5, W}, -2, 3), res = random_tensor(rng, at, {5, W});
      const HostTensor gamma = random_tensor(rng, at, {W}, 0.5, 1.5), beta = random_tensor(rng, at, {W});
      HostTensor y = host_tensor(at, {5, W}), mean = host_tensor(DType::f32, {5}), rstd = host_tensor(DType::f32, {5});
      ref().residual_layernorm_train(y.view, mean.view, rstd.view, x.view, res.view, gamma.view, beta.view, 1e-5f);
      const TensorView dy = r.in(random_tensor(rng, at, {5, W}));
      r.ops.layernorm_backward(r.out("dx", at, {5, W}), r.inout("dgamma", random_tensor(rng, DType::f32, {W})),
                               r.inout("dbeta", random_tensor(rng, DType::f32, {W})), dy, r.in(x), r.in(res),
                               r.in(mean), r.in(rstd), r.in(gamma), Accumulate::no);
    });
    // dx (f32, holding the residual path's gradient) += ds: the pre-norm
    // backward's folded add. Widths for each CUDA path (a warp per row with
    // 4 and 16 values a lane, a block per row above 1024), with and without
    // a residual (ModernBERT's norms have none), dgamma alone or none, one row.
    struct LnAccShape {
      int64_t rows, width;
      bool residual, dgamma;
    };
    for (const LnAccShape sh : {LnAccShape{T, 70, true, true}, LnAccShape{9, 300, false, true},
                                LnAccShape{5, 1100, false, false}, LnAccShape{1, 1100, true, true}})
      train("layernorm_backward",
            dt + "_acc_t" + std::to_string(sh.rows) + "h" + std::to_string(sh.width) + (sh.residual ? "" : "_nores"),
            at, sh.rows, [=](Run& r, Rng& rng) {
              const int64_t R = sh.rows, W = sh.width;
              const HostTensor x = random_tensor(rng, at, {R, W}, -2, 3), res = random_tensor(rng, at, {R, W});
              const HostTensor zero = host_tensor(at, {R, W});
              const HostTensor gamma = random_tensor(rng, at, {W}, 0.5, 1.5), beta = random_tensor(rng, at, {W});
              HostTensor y = host_tensor(at, {R, W}), mean = host_tensor(DType::f32, {R}),
                         rstd = host_tensor(DType::f32, {R});
              ref().residual_layernorm_train(y.view, mean.view, rstd.view, x.view, sh.residual ? res.view : zero.view,
                                             gamma.view, beta.view, 1e-5f);
              const TensorView dy = r.in(random_tensor(rng, at, {R, W}));
              const TensorView dx = r.inout("dx", random_tensor(rng, DType::f32, {R, W}, -2, 2));
              const TensorView dgamma = sh.dgamma ? r.inout("dgamma", random_tensor(rng, DType::f32, {W})) : TensorView{};
              r.ops.layernorm_backward(dx, dgamma, TensorView{}, dy, r.in(x), sh.residual ? r.in(res) : TensorView{},
                                       r.in(mean), r.in(rstd), r.in(gamma), Accumulate::yes);
            });
    train("embed_layernorm_train", dt, at, 0, [=](Run& r, Rng& rng) {
      const Embeddings e = embeddings(rng, DType::f32, H);
      r.ops.embed_layernorm_train(r.out("out", at, {T, H}), r.out("mean", DType::f32, {T}),
                                  r.out("rstd", DType::f32, {T}), r.in(e.ids), r.in(e.positions),
                                  r.in(e.type_ids), r.in(e.word), r.in(e.pos), r.in(e.type), r.in(e.gamma),
                                  r.in(e.beta), 1e-12f);
    });
    train("embed_layernorm_backward", dt, at, T, [=](Run& r, Rng& rng) {
      const Embeddings e = embeddings(rng, at, H);
      HostTensor y = host_tensor(at, {T, H}), mean = host_tensor(DType::f32, {T}), rstd = host_tensor(DType::f32, {T});
      ref().embed_layernorm_train(y.view, mean.view, rstd.view, e.ids.view, e.positions.view, e.type_ids.view,
                                  e.word.view, e.pos.view, e.type.view, e.gamma.view, e.beta.view, 1e-12f);
      const TensorView dy = r.in(random_tensor(rng, at, {T, H}));
      r.ops.embed_layernorm_backward(r.out("dword", DType::f32, {50, H}), r.out("dpos", DType::f32, {40, H}),
                                     r.out("dtype", DType::f32, {2, H}), r.out("dgamma", DType::f32, {H}),
                                     r.out("dbeta", DType::f32, {H}), dy, r.in(e.ids), r.in(e.positions),
                                     r.in(e.type_ids), r.in(e.word), r.in(e.pos), r.in(e.type), r.in(mean),
                                     r.in(rstd), r.in(e.gamma));
    });
    // Many tokens: the CUDA reductions' chunks (64 rows) and the word and
    // position tables' long runs of tokens sharing a row; a type table of 2
    // rows (summed as columns on CUDA) and one of 6 (sorted into runs).
    for (const int32_t TV : {2, 6}) {
      const int64_t TL = 700;
      train("embed_layernorm_backward", dt + "_long_types" + std::to_string(TV), at, TL, [=](Run& r, Rng& rng) {
        const Embeddings e = embeddings(rng, at, H, TL, TV);
        HostTensor y = host_tensor(at, {TL, H}), mean = host_tensor(DType::f32, {TL}),
                   rstd = host_tensor(DType::f32, {TL});
        ref().embed_layernorm_train(y.view, mean.view, rstd.view, e.ids.view, e.positions.view, e.type_ids.view,
                                    e.word.view, e.pos.view, e.type.view, e.gamma.view, e.beta.view, 1e-12f);
        const TensorView dy = r.in(random_tensor(rng, at, {TL, H}));
        r.ops.embed_layernorm_backward(r.out("dword", DType::f32, {50, H}), r.out("dpos", DType::f32, {40, H}),
                                       r.out("dtype", DType::f32, {TV, H}), r.out("dgamma", DType::f32, {H}),
                                       r.out("dbeta", DType::f32, {H}), dy, r.in(e.ids), r.in(e.positions),
                                       r.in(e.type_ids), r.in(e.word), r.in(e.pos), r.in(e.type), r.in(mean),
                                       r.in(rstd), r.in(e.gamma));
      });
    }
    // Tall inputs: the column sums of db and dbias in several CUDA chunks.
    train("linear_backward", dt + "_tall", at, 1000, [=](Run& r, Rng& rng) {
      const int64_t M = 1000, N = 33, K = 17;
      const TensorView a = r.in(random_tensor(rng, at, {M, K})), w = r.in(random_tensor(rng, at, {N, K}, -0.2, 0.2));
      const TensorView dy = r.in(random_tensor(rng, at, {M, N}));
      r.ops.linear_backward(r.out("da", at, {M, K}), r.inout("dw", random_tensor(rng, DType::f32, {N, K})),
                            r.inout("db", random_tensor(rng, DType::f32, {N})), dy, a, w, Accumulate::no);
    });
    train("bias_gelu_backward", dt + "_tall", at, 700, [=](Run& r, Rng& rng) {
      const TensorView dy = r.in(random_tensor(rng, at, {700, 65}));
      const TensorView pre = r.in(random_tensor(rng, at, {700, 65}, -6, 6));
      r.ops.bias_gelu_backward(r.out("dx", at, {700, 65}), r.inout("dbias", random_tensor(rng, DType::f32, {65})),
                               dy, pre);
    });
    train("bias_gelu_train", dt, at, 0, [=](Run& r, Rng& rng) {
      const TensorView x = r.inout("x", random_tensor(rng, at, {T, 65}, -6, 6));
      r.ops.bias_gelu_train(x, r.out("pre", DType::f32, {T, 65}), r.in(random_tensor(rng, DType::f32, {65})));
    });
    train("bias_gelu_backward", dt, at, T, [=](Run& r, Rng& rng) {
      const TensorView dy = r.in(random_tensor(rng, at, {T, 65})), pre = r.in(random_tensor(rng, at, {T, 65}, -6, 6));
      r.ops.bias_gelu_backward(r.out("dx", at, {T, 65}), r.inout("dbias", random_tensor(rng, DType::f32, {65})), dy,
                               pre);
    });
    train("tanh_backward", dt, at, 0, [=](Run& r, Rng& rng) {
      const TensorView dy = r.in(random_tensor(rng, at, {5, 65})), y = r.in(random_tensor(rng, at, {5, 65}, -0.9, 0.9));
      r.ops.tanh_backward(r.out("dx", at, {5, 65}), dy, y);
    });
    train("relu_backward", dt, at, 0, [=](Run& r, Rng& rng) {
      const TensorView dy = r.in(random_tensor(rng, at, {5, 65})), y = r.in(random_tensor(rng, at, {5, 65}, -0.9, 0.9));
      r.ops.relu_backward(r.out("dx", at, {5, 65}), dy, y);
    });
    // p = 0.1 also with a row offset (a data-parallel rank's slice of the batch).
    for (const Ops::AttentionDropout& dropout : {Ops::AttentionDropout{0.0f, 1234, 5, 6},
                                                Ops::AttentionDropout{0.1f, 1234, 5, 6},
                                                Ops::AttentionDropout{0.1f, 1234, 5, 6, 1000003}}) {
      const std::string what = dt + "_p" + std::to_string(static_cast<int>(dropout.p * 10)) +
                               (dropout.row_offset ? "_offset" : "");
      train("attention_train", what, at, 16, [=](Run& r, Rng& rng) {
        const TensorView qkv = r.in(random_tensor(rng, at, {T, 3 * 2 * 16}, -2.5, 2.5));
        r.ops.attention_train(r.out("out", at, {T, 32}), r.out("lse", DType::f32, {T, 2}), qkv,
                              r.in(cu_seqlens(lens)), 2, 16, 0, dropout);
      });
      if (dropout.p > 0 && dropout.row_offset == 0) {
        // The step from device memory (a graph's): the reference run reads it
        // too, and test_ops_train proves it draws the host step's mask.
        train("attention_train", what + "_device_step", at, 16, [=](Run& r, Rng& rng) {
          const TensorView qkv = r.in(random_tensor(rng, at, {T, 3 * 2 * 16}, -2.5, 2.5));
          Ops::AttentionDropout d = dropout;
          d.step = Ops::DropoutStep(r.in(step_tensor(5)));
          r.ops.attention_train(r.out("out", at, {T, 32}), r.out("lse", DType::f32, {T, 2}), qkv,
                                r.in(cu_seqlens(lens)), 2, 16, 0, d);
        });
        train("attention_backward", what + "_device_step", at, 16, [=](Run& r, Rng& rng) {
          const HostTensor qkv = random_tensor(rng, at, {T, 3 * 2 * 16}, -2.5, 2.5), cu = cu_seqlens(lens);
          HostTensor out = host_tensor(at, {T, 32}), lse = host_tensor(DType::f32, {T, 2});
          ref().attention_train(out.view, lse.view, qkv.view, cu.view, 2, 16, 0, dropout);
          const TensorView dout = r.in(random_tensor(rng, at, {T, 32}));
          Ops::AttentionDropout d = dropout;
          d.step = Ops::DropoutStep(r.in(step_tensor(5)));
          r.ops.attention_backward(r.out("dqkv", at, {T, 96}), dout, r.in(qkv), r.in(out), r.in(lse), r.in(cu), 2, 16,
                                   0, d);
        });
      }
      train("attention_backward", what, at, 16, [=](Run& r, Rng& rng) {
        const HostTensor qkv = random_tensor(rng, at, {T, 3 * 2 * 16}, -2.5, 2.5), cu = cu_seqlens(lens);
        HostTensor out = host_tensor(at, {T, 32}), lse = host_tensor(DType::f32, {T, 2});
        ref().attention_train(out.view, lse.view, qkv.view, cu.view, 2, 16, 0, dropout);
        const TensorView dout = r.in(random_tensor(rng, at, {T, 32}));
        r.ops.attention_backward(r.out("dqkv", at, {T, 96}), dout, r.in(qkv), r.in(out), r.in(lse), r.in(cu), 2, 16, 0,
                                 dropout);
      });
      // The sliding window (local layers) in training: sequences longer and
      // shorter than it, the dropout mask indexed by the absolute key.
      const std::vector<int32_t> wl = {40, 3, 90};
      const int64_t wt = 133;
      const int window = 6;
      train("attention_train", what + "_window", at, 2 * window + 1, [=](Run& r, Rng& rng) {
        const TensorView qkv = r.in(random_tensor(rng, at, {wt, 3 * 2 * 24}, -2.5, 2.5));
        r.ops.attention_train(r.out("out", at, {wt, 48}), r.out("lse", DType::f32, {wt, 2}), qkv,
                              r.in(cu_seqlens(wl)), 2, 90, window, dropout);
      });
      train("attention_backward", what + "_window", at, 2 * window + 1, [=](Run& r, Rng& rng) {
        const HostTensor qkv = random_tensor(rng, at, {wt, 3 * 2 * 24}, -2.5, 2.5), cu = cu_seqlens(wl);
        HostTensor out = host_tensor(at, {wt, 48}), lse = host_tensor(DType::f32, {wt, 2});
        ref().attention_train(out.view, lse.view, qkv.view, cu.view, 2, 90, window, dropout);
        const TensorView dout = r.in(random_tensor(rng, at, {wt, 48}));
        r.ops.attention_backward(r.out("dqkv", at, {wt, 144}), dout, r.in(qkv), r.in(out), r.in(lse), r.in(cu), 2, 90,
                                 window, dropout);
      });
    }
    // MPNet's relative-position bias: rel [2 * 16 - 1, 2] (the CUDA backend
    // has the forward; its training variants are CPU only, as all training ops).
    for (const Ops::AttentionDropout& dropout : {Ops::AttentionDropout{0.0f, 1234, 5, 6},
                                                Ops::AttentionDropout{0.1f, 1234, 5, 6},
                                                Ops::AttentionDropout{0.1f, 1234, 5, 6, 1000003}}) {
      const float p = dropout.p;
      const std::string what = dt + "_p" + std::to_string(static_cast<int>(p * 10)) +
                               (dropout.row_offset ? "_offset" : "");
      if (p == 0.0f)
        add("attention_relpos", dt, at, 16, [=](Run& r, Rng& rng) {
          const TensorView qkv = r.in(random_tensor(rng, at, {T, 3 * 2 * 16}, -2.5, 2.5));
          r.ops.attention_relpos(r.out("out", at, {T, 32}), qkv, r.in(cu_seqlens(lens)), 2, 16,
                                 r.in(random_tensor(rng, DType::f32, {31, 2}, -2, 2)));
        });
      train("attention_relpos_train", what, at, 16, [=](Run& r, Rng& rng) {
        const TensorView qkv = r.in(random_tensor(rng, at, {T, 3 * 2 * 16}, -2.5, 2.5));
        r.ops.attention_relpos_train(r.out("out", at, {T, 32}), r.out("lse", DType::f32, {T, 2}), qkv,
                                     r.in(cu_seqlens(lens)), 2, 16, r.in(random_tensor(rng, DType::f32, {31, 2}, -2, 2)),
                                     dropout);
      });
      train("attention_relpos_backward", what, at, 16, [=](Run& r, Rng& rng) {
        relpos_backward_case(r, rng, at, at, lens, 2, 16, 16, dropout, dropout);
      });
    }
    // drel's 64 x 64 tile pairs on CUDA (kernels_attention_relpos.cu), every
    // dtype: several sequences, several tiles each way and tile edges (1, 64,
    // 65, 130, 200), so distances cross key tiles and meet the carry between
    // them; head dim 40 (a staged chunk of 32 and one of 8); max_seqlen past
    // the longest sequence (rel rows no pair reaches: drel 0 there); dropout
    // (the mask at keys past the first tile).
    for (const Ops::AttentionDropout& dropout :
         {Ops::AttentionDropout{0.0f, 1234, 5, 6}, Ops::AttentionDropout{0.1f, 1234, 5, 6}}) {
      const std::vector<int32_t> tl = {130, 1, 65, 200, 64};
      const int max_len = 210;
      train("attention_relpos_backward", dt + "_tiles_p" + std::to_string(static_cast<int>(dropout.p * 10)), at, max_len,
            [=](Run& r, Rng& rng) { relpos_backward_case(r, rng, at, at, tl, 2, 40, max_len, dropout, dropout); });
    }
    // The flash kernels of the CUDA training attention (bf16/f16, head dim
    // <= 128): head dims 16, 64, 128, 40 (a multiple of 8, not of 16: the
    // padded MMA columns) and 36 and 20 (not multiples of 8: a head's row is
    // not 16-byte aligned, so the tiles load element by element — the scalar
    // path of load_tile), lengths at the 64-row tile edges (1, 63, 64,
    // 65, 130) and one long sequence (700: eleven tiles each way; d 16 keeps
    // it quick under scripts/gpu-check.sh's compute-sanitizer budget), a
    // window that spans tiles, dropout with a fixed and a device-side step,
    // MPNet's bias (not on the d 16 / 128 edge cases: the other cases and the
    // relpos cases above cover those), and dout / dqkv in f32 as the trainer
    // passes them (dout then rounded to 16 bits for the MMAs: one more
    // rounding of the size counted below). Tolerances: the case's precision, as
    // for every op — reasoned for these kernels: S, dP and all sums are f32
    // (error ~1e-6 relative); P, dS and an f32 dout are rounded to the
    // activation dtype for the MMAs and each output once more when stored:
    // at most three roundings on a path, each of relative error <= u (2^-8
    // bf16, 2^-11 f16), RMS about u / 2, random in sign. The rounded terms
    // enter sums whose exact values are of the size of the terms'
    // root-sum-square (random q, k, v: no cancellation beyond what the
    // reference has too), so the relative L2 error is about
    // sqrt(3) x u / 2 = 3.4e-3 (bf16; tolerance 2e-2) and 4.2e-4 (f16;
    // tolerance 2e-3): five times the room or more, not loosened.
    if (at != DType::f32) {
      struct Flash {
        std::string what;
        std::vector<int32_t> lens;
        int d, window;
        Ops::AttentionDropout dropout;
        bool device_step;
        bool f32_grads = false;  // dout and dqkv f32, as the trainer passes them
      };
      const Ops::AttentionDropout none{0.0f, 1234, 5, 6}, p1{0.1f, 1234, 5, 6};
      const std::vector<int32_t> edges = {1, 63, 64, 65, 130};
      const std::vector<Flash> flash = {
          {"d16_edges", edges, 16, 0, none, false},
          {"d64_edges", edges, 64, 0, none, false},
          {"d128_edges", edges, 128, 0, none, false},
          {"d40_edges", edges, 40, 0, none, false},
          {"d36_edges", edges, 36, 0, none, false},
          {"d20_p1_f32_grads", {65, 130, 1}, 20, 0, p1, false, true},
          {"d16_len700", {700, 5}, 16, 0, none, false},
          {"d64_window40", {130, 65, 300, 1}, 64, 40, none, false},
          {"d64_p1", {65, 130, 1}, 64, 0, p1, false},
          {"d64_p1_device_step", {65, 130, 1}, 64, 0, p1, true},
          {"d64_window40_p1", {130, 300}, 64, 40, p1, false},
          {"d64_edges_f32_grads", edges, 64, 0, none, false, true},
          {"d40_window40_p1_f32_grads", {130, 300}, 40, 40, p1, false, true},
      };
      for (const Flash& f : flash) {
        const int heads = 2, d = f.d, window = f.window;
        const std::vector<int32_t> fl = f.lens;
        const int64_t ft = std::accumulate(fl.begin(), fl.end(), int64_t{0});
        const int max_len = *std::max_element(fl.begin(), fl.end());
        const Ops::AttentionDropout dropout = f.dropout;
        const bool device_step = f.device_step;
        const DType gt = f.f32_grads ? DType::f32 : at;
        auto dropout_in = [=](Run& r) {
          Ops::AttentionDropout dd = dropout;
          if (device_step) dd.step = Ops::DropoutStep(r.in(step_tensor(5)));
          return dd;
        };
        const int64_t reach = window ? 2 * window + 1 : max_len;
        train("attention_train", "flash_" + dt + "_" + f.what, at, reach, [=](Run& r, Rng& rng) {
          const TensorView qkv = r.in(random_tensor(rng, at, {ft, 3 * heads * d}, -2.5, 2.5));
          r.ops.attention_train(r.out("out", at, {ft, heads * d}), r.out("lse", DType::f32, {ft, heads}), qkv,
                                r.in(cu_seqlens(fl)), heads, max_len, window, dropout_in(r));
        });
        train("attention_backward", "flash_" + dt + "_" + f.what, at, reach, [=](Run& r, Rng& rng) {
          const HostTensor qkv = random_tensor(rng, at, {ft, 3 * heads * d}, -2.5, 2.5), cu = cu_seqlens(fl);
          HostTensor out = host_tensor(at, {ft, heads * d}), lse = host_tensor(DType::f32, {ft, heads});
          ref().attention_train(out.view, lse.view, qkv.view, cu.view, heads, max_len, window, dropout);
          const TensorView dout = r.in(random_tensor(rng, gt, {ft, heads * d}));
          r.ops.attention_backward(r.out("dqkv", gt, {ft, 3 * heads * d}), dout, r.in(qkv), r.in(out), r.in(lse),
                                   r.in(cu), heads, max_len, window, dropout_in(r));
        });
        if (window != 0 || f.what == "d16_edges" || f.what == "d128_edges") continue;
        // MPNet's bias on the same shapes: rel [2 * max_len - 1, heads].
        train("attention_relpos_train", "flash_" + dt + "_" + f.what, at, max_len, [=](Run& r, Rng& rng) {
          const TensorView qkv = r.in(random_tensor(rng, at, {ft, 3 * heads * d}, -2.5, 2.5));
          const TensorView rel = r.in(random_tensor(rng, DType::f32, {2 * max_len - 1, heads}, -2, 2));
          r.ops.attention_relpos_train(r.out("out", at, {ft, heads * d}), r.out("lse", DType::f32, {ft, heads}), qkv,
                                       r.in(cu_seqlens(fl)), heads, max_len, rel, dropout_in(r));
        });
        train("attention_relpos_backward", "flash_" + dt + "_" + f.what, at, max_len, [=](Run& r, Rng& rng) {
          relpos_backward_case(r, rng, at, gt, fl, heads, d, max_len, dropout, dropout_in(r));
        });
      }
    }
    train("gather_rows_backward", dt, at, 2, [=](Run& r, Rng& rng) {
      const TensorView dh = r.inout("dh", random_tensor(rng, at, {T, H}));
      r.ops.gather_rows_backward(dh, r.in(random_tensor(rng, at, {5, H})), r.in(index_tensor({0, 7, 8, 23, 7})));
    });
    for (Pooling mode : {Pooling::cls, Pooling::mean, Pooling::max, Pooling::mean_sqrt_len,
                             Pooling::lasttoken})
      train("pool_backward", dt + "_mode" + std::to_string(static_cast<int>(mode)), at, 0, [=](Run& r, Rng& rng) {
        const TensorView h = r.in(random_tensor(rng, at, {T, H}));
        const TensorView dout = r.in(random_tensor(rng, DType::f32, {B, H}));
        r.ops.pool_backward(r.out("dh", at, {T, H}), dout, h, r.in(cu_seqlens(lens)), mode);
      });
    train("add", dt, at, 0, [=](Run& r, Rng& rng) {
      const TensorView y = r.inout("y", random_tensor(rng, at, {T, H}));
      r.ops.add(y, r.in(random_tensor(rng, at, {T, H})));
    });

    // --- training: dropout, loss, optimizer
    // Row offsets: 0 (a whole batch) and a slice's first row, with rows of
    // H = 63 elements (the offset lands inside a Philox block) and of 64
    // (on a block boundary).
    for (uint64_t offset : {uint64_t{0}, uint64_t{37}}) {
      const std::string what = dt + (offset ? "_offset" : "");
      train("dropout", what, at, 0, [=](Run& r, Rng& rng) {
        const TensorView x = r.in(random_tensor(rng, at, {T, H}));
        r.ops.dropout(r.out("out", at, {T, H}), x, 0.1f, 42, 3, 7, offset);
        const TensorView x64 = r.in(random_tensor(rng, at, {T, 64}));
        r.ops.dropout(r.out("out64", at, {T, 64}), x64, 0.1f, 42, 3, 7, offset);
      });
      train("dropout_backward", what, at, 0, [=](Run& r, Rng& rng) {
        const TensorView dy = r.in(random_tensor(rng, at, {T, H}));
        r.ops.dropout_backward(r.out("dx", at, {T, H}), dy, 0.5f, 42, 3, 7, offset);
      });
      // The step from device memory (Ops::DropoutStep), as a replayed graph passes it.
      train("dropout", what + "_device_step", at, 0, [=](Run& r, Rng& rng) {
        const TensorView x = r.in(random_tensor(rng, at, {T, H}));
        r.ops.dropout(r.out("out", at, {T, H}), x, 0.1f, 42, Ops::DropoutStep(r.in(step_tensor(3))), 7, offset);
      });
      train("dropout_backward", what + "_device_step", at, 0, [=](Run& r, Rng& rng) {
        const TensorView dy = r.in(random_tensor(rng, at, {T, H}));
        r.ops.dropout_backward(r.out("dx", at, {T, H}), dy, 0.5f, 42, Ops::DropoutStep(r.in(step_tensor(3))), 7,
                               offset);
      });
    }
    train("sum_squares", dt, at, T * H, [=](Run& r, Rng& rng) {
      const TensorView x = r.in(random_tensor(rng, at, {T, H}));
      r.ops.sum_squares(r.out("out", DType::f64, {1}), x);
    });
  }
  for (float smoothing : {0.0f, 0.1f})
    train("cross_entropy", "smoothing" + std::to_string(static_cast<int>(smoothing * 10)), DType::f32, 7,
          [=](Run& r, Rng& rng) {
            const int64_t N = 9, C = 7;
            const TensorView logits = r.in(random_tensor(rng, DType::f32, {N, C}, -4, 4));
            const TensorView labels = r.in(index_tensor(draw(rng, N, C)));
            r.ops.cross_entropy(r.out("dlogits", DType::f32, {N, C}), r.out("metrics", DType::f64, {3}), logits,
                                labels, smoothing, 1.0f / N);
          });
  train("mse_loss", "f32", DType::f32, 9, [=](Run& r, Rng& rng) {
    const TensorView pred = r.in(random_tensor(rng, DType::f32, {9, 1}, -2, 2));
    const TensorView target = r.in(random_tensor(rng, DType::f32, {9}, -2, 2));
    r.ops.mse_loss(r.out("dpred", DType::f32, {9, 1}), r.out("metrics", DType::f64, {3}), pred, target, 1.0f / 9);
  });
  // embedding_loss: each kind, a negative column (groups 3), a Matryoshka
  // prefix, dot products, and rows with a common offset of 100 and spread 1
  // (trained models' embeddings: nearly parallel, the gradient in their
  // small differences). weight and grad_scale other than 1. The tolerance
  // (tests/ops/test_embedding_loss.cc says why): each similarity of a
  // backend's f32 products carries about scale * u * sqrt(d) of absolute
  // error, and the loss and the softmax gradient move by as much
  // relatively: 20 * 2^-24 * sqrt(48) = 8.3e-6 at most here; 1e-5.
  using Kind = Ops::EmbeddingLoss::Kind;
  struct EmbeddingLossCase {
    const char* what;
    Kind kind;
    int64_t B, groups, D, dims;
    bool normalize;
    float scale;
    double offset;
  };
  const EmbeddingLossCase embedding_loss_cases[] = {
      {"mnrl", Kind::mnrl, 9, 2, 40, 0, true, 20.0f, 0.0},
      {"mnrl_negatives_prefix", Kind::mnrl, 7, 3, 48, 24, true, 20.0f, 0.0},
      {"mnrl_dot", Kind::mnrl, 8, 2, 16, 0, false, 1.0f, 0.0},
      {"mnrl_offset", Kind::mnrl, 9, 3, 48, 0, true, 20.0f, 100.0},
      {"mnrl_symmetric", Kind::mnrl_symmetric, 9, 3, 40, 0, true, 20.0f, 0.0},
      {"mnrl_symmetric_offset", Kind::mnrl_symmetric, 8, 2, 48, 32, true, 20.0f, 100.0},
      {"cosent", Kind::cosent, 11, 2, 40, 0, true, 20.0f, 0.0},
      {"cosent_offset_prefix", Kind::cosent, 10, 2, 48, 16, true, 20.0f, 100.0},
      {"cosine_mse", Kind::cosine_mse, 11, 2, 40, 0, true, 20.0f, 0.0},
      {"cosine_mse_offset", Kind::cosine_mse, 10, 2, 48, 8, true, 20.0f, 100.0},
  };
  for (const EmbeddingLossCase& e : embedding_loss_cases)
    train("embedding_loss", e.what, DType::f32, 0, [=](Run& r, Rng& rng) {
      const int64_t R = e.B * e.groups, d = e.dims ? e.dims : e.D;
      const TensorView emb = r.in(random_tensor(rng, DType::f32, {R, e.D}, e.offset - 1, e.offset + 1));
      const bool pairs = e.kind == Kind::cosent || e.kind == Kind::cosine_mse;
      HostTensor scores = host_tensor(DType::f32, {e.B});
      for (int64_t b = 0; b < e.B; ++b) scores.view.as<float>()[b] = static_cast<float>(rng.below(5)) / 4.0f;
      const TensorView ws = r.dev.zeros(DType::f32, {embedding_loss_workspace_floats(e.B, e.groups, d)});
      Ops::EmbeddingLoss loss;
      loss.kind = e.kind;
      loss.groups = e.groups;
      loss.dims = e.dims;
      loss.normalize = e.normalize;
      loss.scale = e.scale;
      loss.weight = 0.5f;
      loss.grad_scale = 0.25f;
      r.ops.embedding_loss(r.out("d_emb", DType::f32, {R, e.D}), r.out("metrics", DType::f64, {3}), emb,
                           pairs ? r.in(scores) : TensorView{}, ws, loss);
    }).tol = 1e-5;
  // A Matryoshka sum on one d_emb and metrics: the whole vector (counting),
  // then a prefix (its loss only), into a gradient already holding values;
  // and an evaluation call (no d_emb).
  train("embedding_loss", "matryoshka_sum", DType::f32, 0, [=](Run& r, Rng& rng) {
    const int64_t B = 8, groups = 2, R = B * groups, D = 32;
    const TensorView emb = r.in(random_tensor(rng, DType::f32, {R, D}));
    const TensorView ws = r.dev.zeros(DType::f32, {embedding_loss_workspace_floats(B, groups, D)});
    const TensorView d_emb = r.inout("d_emb", random_tensor(rng, DType::f32, {R, D}, -0.05, 0.05));
    const TensorView metrics = r.out("metrics", DType::f64, {3});
    Ops::EmbeddingLoss loss;
    r.ops.embedding_loss(d_emb, metrics, emb, TensorView{}, ws, loss);
    loss.dims = 8;
    loss.weight = 0.7f;
    loss.count = false;
    r.ops.embedding_loss(d_emb, metrics, emb, TensorView{}, ws, loss);
    r.ops.embedding_loss(TensorView{}, r.out("eval_metrics", DType::f64, {3}), emb, TensorView{}, ws,
                         Ops::EmbeddingLoss{});
  }).tol = 1e-5;
  for (double sumsq : {0.25, 400.0})
    train("clip_scale", "sumsq" + std::to_string(static_cast<int>(sumsq)), DType::f32, 0, [=](Run& r, Rng&) {
      HostTensor s = host_tensor(DType::f64, {1});
      s.view.as<double>()[0] = sumsq;
      r.ops.clip_scale(r.out("scale", DType::f32, {1}), r.in(s), 1.0f);
    });
  // adamw's tensors: 1000 parameters, their gradient and moments, and the
  // decay ranges [0, 300) and [640, 1000).
  struct AdamWState {
    TensorView p, g, m, v, ranges;
  };
  auto adamw_state = [](Run& r, Rng& rng) {
    const int64_t n = 1000;
    AdamWState st;
    st.p = r.inout("p", random_tensor(rng, DType::f32, {n}));
    st.g = r.in(random_tensor(rng, DType::f32, {n}, -0.1, 0.1));
    st.m = r.inout("m", random_tensor(rng, DType::f32, {n}, -0.01, 0.01));
    st.v = r.inout("v", random_tensor(rng, DType::f32, {n}, 0.0, 1e-4));
    HostTensor ranges = host_tensor(DType::i64, {2, 2});
    for (int i = 0; i < 4; ++i) ranges.view.as<int64_t>()[i] = std::vector<int64_t>{0, 300, 640, 1000}[i];
    st.ranges = r.in(ranges);
    return st;
  };
  for (bool scaled : {false, true})
    train("adamw", scaled ? "grad_scale" : "plain", DType::f32, 0, [=](Run& r, Rng& rng) {
      const AdamWState st = adamw_state(r, rng);
      HostTensor scale = host_tensor(DType::f32, {1});
      scale.view.as<float>()[0] = 0.5f;
      Ops::AdamWStep hp;
      hp.step = 3;
      hp.lr = 1e-3;
      hp.weight_decay = 0.01;
      r.ops.adamw(st.p, st.g, st.m, st.v, st.ranges, scaled ? r.in(scale) : TensorView{}, TensorView{}, hp);
    });

  // --- f16 training's dynamic loss scale. Every result is one f32 multiply
  // per element, or the scaler's counts: bit for bit on every backend.
  auto scaler_state = [](double scale, double tracker, double found_inf, double skipped, double steps) {
    HostTensor s = host_tensor(DType::f64, {Ops::LossScaler::kSlots});
    double* d = s.view.as<double>();
    d[Ops::LossScaler::kScale] = scale;
    d[Ops::LossScaler::kGrowthTracker] = tracker;
    d[Ops::LossScaler::kFoundInf] = found_inf;
    d[Ops::LossScaler::kSkippedSteps] = skipped;
    d[Ops::LossScaler::kOptimizerSteps] = steps;
    return s;
  };
  for (DType at : acts) {
    const std::string dt = dname(at);
    train("loss_scale_multiply", dt, at, 0, [=](Run& r, Rng& rng) {
      const TensorView scaler = r.in(scaler_state(65536.0, 3, 0, 1, 9));
      r.ops.loss_scale_multiply(r.inout("x", random_tensor(rng, at, {9, 7}, -0.01, 0.01)), scaler);
      // A scale that is not a power of two rounds each product.
      r.ops.loss_scale_multiply(r.inout("x_rounded", random_tensor(rng, at, {5, 65})),
                                r.in(scaler_state(3000.5, 0, 0, 0, 0)));
    }).exact = true;
    // A clean gradient (the flag stays as it was: 0 here, 1 kept), one with
    // +-inf (unscaled to +-inf, flag set), one with a NaN (flag set; NaN
    // payloads differ between CPUs and GPUs, so only the flag is compared).
    train("loss_scale_unscale", dt + "_clean", at, 0, [=](Run& r, Rng& rng) {
      r.ops.loss_scale_unscale(r.inout("g", random_tensor(rng, at, {T, H}, -3000, 3000)),
                               r.inout("scaler", scaler_state(32768.0, 5, 0, 2, 40)));
      r.ops.loss_scale_unscale(r.inout("g_sticky", random_tensor(rng, at, {5, 65})),
                               r.inout("scaler_sticky", scaler_state(3000.5, 0, 1, 0, 0)));
    }).exact = true;
    train("loss_scale_unscale", dt + "_inf", at, 0, [=](Run& r, Rng& rng) {
      HostTensor g = random_tensor(rng, at, {T, H}, -3000, 3000);
      test::host_tensors::set(g.view, 17, std::numeric_limits<double>::infinity());
      test::host_tensors::set(g.view, T * H - 1, -std::numeric_limits<double>::infinity());
      r.ops.loss_scale_unscale(r.inout("g", g), r.inout("scaler", scaler_state(65536.0, 7, 0, 0, 12)));
    }).exact = true;
    train("loss_scale_unscale", dt + "_nan", at, 0, [=](Run& r, Rng& rng) {
      HostTensor g = random_tensor(rng, at, {T, H});
      test::host_tensors::set(g.view, 40, std::numeric_limits<double>::quiet_NaN());
      r.ops.loss_scale_unscale(r.in(g), r.inout("scaler", scaler_state(65536.0, 7, 0, 0, 12)));
    }).exact = true;
  }
  // The update: a clean step inside the interval, the interval's last clean
  // step (growth), growth past the largest f32 (the scale stays), an inf/NaN
  // step (backoff, tracker reset). Interval 4.
  struct ScalerUpdate {
    const char* what;
    double scale, tracker, found_inf;
  };
  for (const ScalerUpdate u : {ScalerUpdate{"clean", 1024.0, 1, 0}, ScalerUpdate{"growth", 1024.0, 3, 0},
                               ScalerUpdate{"growth_capped", 0x1.0p127, 3, 0}, ScalerUpdate{"backoff", 1024.0, 2, 1}})
    train("loss_scale_update", u.what, DType::f32, 0, [=](Run& r, Rng&) {
      r.ops.loss_scale_update(r.inout("scaler", scaler_state(u.scale, u.tracker, u.found_inf, 3, 17)), 2.0f, 0.5f, 4);
    }).exact = true;
  // adamw with a loss scaler: a clean step takes t = the scaler's steps + 1
  // (3, not hp.step = 7); a found inf/NaN leaves p, m and v as they were
  // (their bits: the gradient holds an inf and a NaN that would spread).
  for (bool found_inf : {false, true})
    train("adamw", found_inf ? "scaler_skip" : "scaler_step", DType::f32, 0, [=](Run& r, Rng& rng) {
      const int64_t n = 1000;
      const TensorView p = r.inout("p", random_tensor(rng, DType::f32, {n}));
      HostTensor gh = random_tensor(rng, DType::f32, {n}, -0.1, 0.1);
      if (found_inf) {
        test::host_tensors::set(gh.view, 3, std::numeric_limits<double>::infinity());
        test::host_tensors::set(gh.view, 500, std::numeric_limits<double>::quiet_NaN());
      }
      const TensorView m = r.inout("m", random_tensor(rng, DType::f32, {n}, -0.01, 0.01));
      const TensorView v = r.inout("v", random_tensor(rng, DType::f32, {n}, 0.0, 1e-4));
      HostTensor scale = host_tensor(DType::f32, {1});
      scale.view.as<float>()[0] = 0.5f;
      Ops::AdamWStep hp;
      hp.step = 7;
      hp.lr = 1e-3;
      hp.weight_decay = 0.01;
      r.ops.adamw(p, r.in(gh), m, v, TensorView{}, r.in(scale), r.in(scaler_state(4096.0, 2, found_inf ? 1 : 0, 1, 2)),
                  hp);
    }).exact = found_inf;  // skipped: every backend leaves the very bits
  // adamw with t and lr from device memory (a replayed optimizer-step graph:
  // Ops::AdamWStep::device): hp.step and hp.lr hold other values, which must
  // not be read; with a loss scaler, t is still the scaler's (3) and lr the
  // device's.
  for (bool with_scaler : {false, true})
    train("adamw", with_scaler ? "device_lr_scaler" : "device_step_lr", DType::f32, 0, [=](Run& r, Rng& rng) {
      const AdamWState st = adamw_state(r, rng);
      HostTensor per_step = host_tensor(DType::f64, {2});
      per_step.view.as<double>()[Ops::AdamWStep::kDeviceStep] = 5;
      per_step.view.as<double>()[Ops::AdamWStep::kDeviceLr] = 7.5e-4;
      Ops::AdamWStep hp;
      hp.step = 1000;  // not read
      hp.lr = 0.5;     // not read
      hp.weight_decay = 0.01;
      hp.device = r.in(per_step);
      const TensorView scaler = with_scaler ? r.in(scaler_state(4096.0, 2, 0, 1, 2)) : TensorView{};
      r.ops.adamw(st.p, st.g, st.m, st.v, st.ranges, TensorView{}, scaler, hp);
    });

  // --- decoder embedders (Qwen2, Qwen3): GQA with 4 query heads on 2 k/v
  // heads, a head dim (24) neither hidden / heads nor a power of two.
  for (DType at : acts) {
    const int64_t Hd = 72, heads = 4, kv = 2, d = 24, C = (heads + 2 * kv) * d;
    add("residual_rmsnorm", dname(at), at, Hd, [=](Run& r, Rng& rng) {
      const TensorView h = r.inout("h", random_tensor(rng, DType::f32, {T, Hd}, -2, 3));
      const TensorView x = r.in(random_tensor(rng, at, {T, Hd}));
      r.ops.residual_rmsnorm(h, r.out("out", at, {T, Hd}), x, r.in(random_tensor(rng, DType::f32, {Hd}, 0.5, 1.5)),
                             1e-6f);
    });
    add("residual_rmsnorm", std::string(dname(at)) + "_in_place", at, Hd, [=](Run& r, Rng& rng) {
      const TensorView h = r.inout("h", random_tensor(rng, at, {T, Hd}, -2, 3));
      r.ops.residual_rmsnorm(h, h, TensorView{}, r.in(random_tensor(rng, at, {Hd}, 0.5, 1.5)), 1e-6f);
    });
    add("head_rmsnorm", dname(at), at, d, [=](Run& r, Rng& rng) {
      const TensorView qkv = r.inout("qkv", random_tensor(rng, at, {T, C}, -2, 2));
      r.ops.head_rmsnorm(qkv, r.in(random_tensor(rng, DType::f32, {d}, 0.5, 1.5)),
                         r.in(random_tensor(rng, DType::f32, {d}, 0.5, 1.5)), heads, kv, 1e-6f);
    });
    for (bool causal : {true, false})
      add("attention_gqa", std::string(dname(at)) + (causal ? "_causal" : "_bidirectional"), at, 16,
          [=](Run& r, Rng& rng) {
            const TensorView qkv = r.in(random_tensor(rng, at, {T, C}, -2.5, 2.5));
            r.ops.attention_gqa(r.out("out", at, {T, heads * d}), qkv, r.in(cu_seqlens(lens)), heads, kv, causal, 16);
          });
  }
  return cases;
}

const std::vector<OpCase>& cases() {
  static const std::vector<OpCase> all = make_cases();
  return all;
}

// ---- the backends ----------------------------------------------------------------

const char* const kBackends[] = {"cpu_ref", "cpu_fast", "cuda"};

// The training ops the CUDA backend does not have yet (they refuse, saying
// so); every other op of the list is compared with the reference on CUDA.
// None today: MPNet's attention_relpos_train / _backward were the last.
const std::vector<std::string> kCudaMissingTrainingOps = {};

bool backend_has_op(const std::string& backend, const std::string& op) {
  if (backend != "cuda") return true;
  return std::none_of(kCudaMissingTrainingOps.begin(), kCudaMissingTrainingOps.end(),
                      [&](const std::string& missing) { return op == missing; });
}

// The backend, or nullptr with the reason it is not here.
std::unique_ptr<Backend> make_backend(const std::string& which, std::string& why) {
  if (which == "cpu_ref") return std::make_unique<cpu::CpuBackend>(cpu::reference_kernels());
  if (which == "cpu_fast") return std::make_unique<cpu::CpuBackend>(cpu::fast_kernels());
#ifdef STOKE_HAVE_CUDA
  why = cuda::unavailable_reason();
  if (why.empty()) return std::make_unique<cuda::CudaBackend>(0);
#else
  why = "this stoke was built without the CUDA backend";
#endif
  return nullptr;
}

// Runs case `c` on `backend`: its outputs, read back.
std::vector<std::pair<std::string, HostTensor>> run_case(const OpCase& c, Backend& backend) {
  DeviceTensors dev(backend);
  Run run{backend.ops(), dev, {}};
  Rng rng(seed_of(c.name));
  c.run(run, rng);
  std::vector<std::pair<std::string, HostTensor>> outputs;
  for (const auto& [name, view] : run.results) outputs.emplace_back(name, dev.download(view));
  return outputs;
}

bool bitwise_equal(const TensorView& a, const TensorView& b) {
  return a.dtype == b.dtype && a.numel() == b.numel() && std::equal(static_cast<const char*>(a.data),
                                                                    static_cast<const char*>(a.data) + a.bytes(),
                                                                    static_cast<const char*>(b.data));
}

// STOKE_OP_TABLE_CASES (comma-separated parts of case names, e.g.
// "flash_bf16_d16_edges,flash_f16_d36_edges"): only the cases whose name
// contains one of them run — scripts/gpu-check.sh narrows compute-sanitizer's
// racecheck (about 100 times slower than a plain run) to a few small flash
// cases this way. Unset: every case.
bool case_selected(const std::string& name) {
  const char* env = std::getenv("STOKE_OP_TABLE_CASES");
  if (env == nullptr || *env == '\0') return true;
  const std::string parts = env;
  for (size_t start = 0; start <= parts.size();) {
    const size_t end = std::min(parts.find(',', start), parts.size());
    const std::string part = parts.substr(start, end - start);
    if (!part.empty() && name.find(part) != std::string::npos) return true;
    start = end + 1;
  }
  return false;
}

class OpTable : public testing::TestWithParam<std::tuple<const char*, const char*>> {};

TEST_P(OpTable, MatchesReference) {
  const std::string backend_name = std::get<0>(GetParam()), op = std::get<1>(GetParam());
  std::string why;
#ifdef STOKE_HAVE_CUDA
  // After a sticky fault (an earlier case's kernel broke the context), fail
  // naming it: a skip would read as "no GPU".
  if (backend_name == "cuda")
    if (const auto fault = cuda::sticky_fault()) FAIL() << "the GPU is unusable: " << fault->describe();
#endif
  std::unique_ptr<Backend> backend = make_backend(backend_name, why);
  if (!backend) GTEST_SKIP() << "no usable CUDA device: " << why;
  cpu::CpuBackend reference(cpu::reference_kernels());
  const bool has_op = backend_has_op(backend_name, op);
  int ran = 0;
  int selected_out = 0;
  for (const OpCase& c : cases()) {
    if (c.op != op) continue;
    if (!case_selected(c.name)) {
      ++selected_out;
      continue;
    }
    SCOPED_TRACE(c.name + " on " + backend_name);
    ++ran;
    if (!has_op || (c.cpu_only && backend_name == "cuda")) {
      // A backend without the op refuses it with one clear line.
      try {
        run_case(c, *backend);
        ADD_FAILURE() << "no error from an op this backend does not have";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::unsupported) << e.what();
        EXPECT_NE(std::string(e.what()).find(op + ": not supported on the"), std::string::npos) << e.what();
        if (c.training) {
          EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
        }
      }
      continue;
    }
    const auto want = run_case(c, reference);
    const auto got = run_case(c, *backend);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_FALSE(want.empty()) << "the case names no output";
    for (size_t i = 0; i < want.size(); ++i) {
      const TensorView& g = got[i].second.view;
      const TensorView& w = want[i].second.view;
      SCOPED_TRACE("output " + want[i].first);
      ASSERT_EQ(g.numel(), w.numel());
      if (c.exact || backend_name == "cpu_ref") {
        EXPECT_TRUE(bitwise_equal(g, w)) << "not bit for bit the reference";
      } else {
        // Statistics, metrics and f32 outputs of a low-precision op hold f32
        // values computed from the same low-precision inputs: the case's
        // precision still bounds them.
        const double tol = c.tol > 0 ? c.tol : tolerance(c.precision, c.reduction);
        EXPECT_LE(test::host_tensors::relative_error(g, w), tol) << "relative error against the reference";
      }
    }
  }
  if (ran == 0 && selected_out > 0) GTEST_SKIP() << "no case of " << op << " selected by STOKE_OP_TABLE_CASES";
  EXPECT_GT(ran, 0) << op << " has no case in the op table";
}

std::vector<const char*> op_names() { return std::vector<const char*>(std::begin(kOpNames), std::end(kOpNames)); }

INSTANTIATE_TEST_SUITE_P(EveryOp, OpTable, testing::Combine(testing::ValuesIn(kBackends), testing::ValuesIn(op_names())),
                         [](const testing::TestParamInfo<OpTable::ParamType>& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
                         });

// Adding an op to the list without a case here fails (docs/ops.md).
TEST(OpTableCoverage, EveryOpHasACase) {
  for (const char* op : kOpNames) {
    const auto n = std::count_if(cases().begin(), cases().end(), [&](const OpCase& c) { return c.op == op; });
    EXPECT_GT(n, 0) << op << " is in backend/op_list.h but has no case in tests/ops/test_op_table.cc";
  }
}

// Every case runs an op of the list (a misspelt name would never run).
TEST(OpTableCoverage, EveryCaseNamesAnOp) {
  for (const OpCase& c : cases())
    EXPECT_TRUE(std::any_of(std::begin(kOpNames), std::end(kOpNames), [&](const char* op) { return c.op == op; }))
        << c.name << ": " << c.op << " is not an op of backend/op_list.h";
}

// Case names are unique (each is its own seed).
TEST(OpTableCoverage, CaseNamesAreUnique) {
  std::vector<std::string> names;
  for (const OpCase& c : cases()) names.push_back(c.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
}

// The generated default of a backend without an op: every op of the list
// refuses with Error(unsupported), naming the op, the backend and the advice
// (CUDA's says to train with --device cpu; its own test needs a GPU).
template <class... Args>
void expect_unsupported(const Ops& ops, const std::string& op, void (Ops::*method)(Args...) const) {
  try {
    (ops.*method)(std::decay_t<Args>{}...);  // empty views, zero numbers: never looked at
    ADD_FAILURE() << op << ": no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported) << e.what();
    EXPECT_EQ(std::string(e.what()), op + ": not supported on the test backend; train with --device cpu");
  }
}

TEST(UnsupportedOps, EveryOpRefusesNamingItself) {
  const UnsupportedOps none("test", "train with --device cpu");
#define STOKE_OP(name, params, args) expect_unsupported(none, #name, &Ops::name);
#include "backend/op_list.h"
#undef STOKE_OP
}

}  // namespace
}  // namespace stoke
