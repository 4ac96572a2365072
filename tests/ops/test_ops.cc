// Every op of the CPU op table, fast kernels against the reference kernels, in
// one table of cases (op x sizes x dtypes), plus hand-computed values for the
// reference itself so the oracle can fail too.
//
// Tolerances (relative error ||fast - ref|| / ||ref|| over the whole output):
// - f32: 1e-5, or 16 u sqrt(K) for a GEMM with a long reduction, u = 2^-24.
//   A length-K f32 dot product summed in order has a rounding error of about
//   u K sigma / sqrt 2 against a result of about sqrt(K) sigma for random
//   zero-mean inputs, i.e. a relative error of ~0.7 u sqrt(K) (blocked sums,
//   as oneDNN's, do better); 16 u sqrt(K) leaves a 20x margin and is below
//   1e-5 up to K = 110.
// - bf16: 2e-2 (~5 u for bf16's 8-bit significand, u = 2^-8); f16: 2e-3 (~4 u,
//   u = 2^-11). Both sets compute in f32/f64 and round the output once, so
//   they differ only where that rounding flips; the bounds leave room for a
//   future kernel that keeps low-precision intermediates.
// - data movement (gather_rows, slice_columns, convert): bit-exact.
// Inputs come from a seeded generator (splitmix64), rounded to the tensor's
// dtype when made, so both sets see the very same values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "cpu/fast/fast_ops.h"
#include "cpu/kernels.h"
#include "model/rotary_frequencies.h"
#include "support/host_tensors.h"

namespace stoke::cpu {
namespace {

// ---- host tensors ------------------------------------------------------------

using Tensor = test::host_tensors::HostTensor;  // storage + view (support/host_tensors.h)
using test::host_tensors::get;
using test::host_tensors::set;
Tensor make(DType t, std::vector<int64_t> shape) { return test::host_tensors::host_tensor(t, std::move(shape)); }
Tensor indices(const std::vector<int32_t>& v) { return test::host_tensors::index_tensor(v); }

Tensor from(DType t, std::vector<int64_t> shape, const std::vector<float>& values) {
  Tensor x = make(t, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) set(x.view, static_cast<int64_t>(i), values[i]);
  return x;
}

std::vector<double> values(const TensorView& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = get(t, i);
  return v;
}

using Rng = test::host_tensors::Rng;  // splitmix64 (support/host_tensors.h)

Tensor random(Rng& rng, DType t, std::vector<int64_t> shape, float lo = -1.0f, float hi = 1.0f) {
  Tensor x = make(t, std::move(shape));
  for (int64_t i = 0; i < x.view.numel(); ++i) set(x.view, i, rng.uniform(lo, hi));
  return x;
}

// A LayerNorm's second copy is exactly the convert of its output, in either
// kernel set (the two sets' outputs may differ by rounding; each set's copy
// must match its own output bit for bit).
void expect_copy_is_convert(const Kernels& k, const TensorView& low, const TensorView& out) {
  Tensor want = make(low.dtype, {low.dim(0), low.dim(1)});
  k.convert(want.view, out);
  EXPECT_EQ(values(low), values(want.view)) << k.name << ": the second copy is not the convert of the output";
}

Tensor cu_seqlens(const std::vector<int>& lens) {
  std::vector<int32_t> cu{0};
  for (int n : lens) cu.push_back(cu.back() + n);
  return indices(cu);
}

int total(const std::vector<int>& lens) { return std::accumulate(lens.begin(), lens.end(), 0); }
int longest(const std::vector<int>& lens) { return lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end()); }

// ---- names ---------------------------------------------------------------------

const char* dname(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    default: return "x";
  }
}
const char* aname(Activation a) { return a == Activation::none ? "none" : a == Activation::gelu_erf ? "gelu" : "tanh"; }
const char* pname(Pooling m) {
  switch (m) {
    case Pooling::cls: return "cls";
    case Pooling::mean: return "mean";
    case Pooling::max: return "max";
    case Pooling::mean_sqrt_len: return "meansqrtlen";
    case Pooling::lasttoken: return "last";
  }
  return "x";
}
std::string lens_name(const std::vector<int>& lens) {
  std::string s = "L";
  for (size_t i = 0; i < lens.size(); ++i) s += (i ? "_" : "") + std::to_string(lens[i]);
  return s;
}

// ---- tolerances -----------------------------------------------------------------

constexpr double kUnitF32 = 0x1.0p-24;

double tolerance(DType act, int64_t reduction = 0) {
  switch (act) {
    case DType::bf16: return 2e-2;
    case DType::f16: return 2e-3;
    default: return std::max(1e-5, 16.0 * kUnitF32 * std::sqrt(static_cast<double>(reduction)));
  }
}

double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  if (norm == 0.0) return std::sqrt(diff);  // an all-zero result: compare absolutely
  return std::sqrt(diff / norm);
}

// ---- the table --------------------------------------------------------------------

struct OpCase {
  std::string name;    // op_dtypes_sizes..., unique
  std::string family;  // op and activation dtype, for the summary of worst errors
  double tol = 0.0;
  bool exact = false;           // bit-exact expected (data movement)
  bool force_f32_gemm = false;  // run fast linear as on a CPU without native bf16
  int attention_floats = 0;     // fast attention's vector width: 8 or 16 floats, 0 = the CPU's
  // Makes the inputs (from the case's fixed seed), runs the op with the given
  // kernels, returns the outputs.
  std::function<std::vector<double>(const Kernels&)> run;
};

std::ostream& operator<<(std::ostream& os, const OpCase& c) { return os << c.name; }

uint64_t seed_of(const std::string& name) {  // FNV-1a: each case its own stream
  uint64_t h = 1469598103934665603ull;
  for (char ch : name) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  return h;
}

// (activation dtype, weight dtype) pairs the ops allow.
const std::vector<std::pair<DType, DType>> kDtypePairs = {{DType::f32, DType::f32},
                                                          {DType::bf16, DType::bf16},
                                                          {DType::bf16, DType::f32},
                                                          {DType::f16, DType::f16},
                                                          {DType::f16, DType::f32}};
const DType kActs[] = {DType::f32, DType::bf16, DType::f16};

void add_linear_cases(std::vector<OpCase>& cases) {
  struct Shape {
    int64_t M, N, K;
  };
  const std::vector<Shape> shapes = {{1, 1, 1},    {1, 3, 7},     {3, 16, 63},   {7, 64, 65},    {16, 127, 128},
                                     {63, 129, 3}, {64, 65, 127}, {65, 7, 129},  {127, 128, 16}, {128, 63, 64},
                                     {129, 1, 1},  {1, 129, 127}, {1, 768, 768}, {3, 16, 3072},  {8, 3072, 768},
                                     {3, 5, 0},    {0, 5, 3}};
  const Activation acts[] = {Activation::none, Activation::gelu_erf, Activation::tanh};
  auto add = [&](Shape s, DType at, DType wt, Activation act, bool bias, bool force_f32) {
    OpCase c;
    c.name = std::string("linear_") + dname(at) + "_w" + dname(wt) + "_M" + std::to_string(s.M) + "_N" +
             std::to_string(s.N) + "_K" + std::to_string(s.K) + "_" + aname(act) + (bias ? "_bias" : "") +
             (force_f32 ? "_forcedf32" : "");
    c.family = std::string("linear ") + dname(at);
    c.tol = tolerance(at, s.K);
    c.force_f32_gemm = force_f32;
    const uint64_t seed = seed_of(c.name);
    c.run = [=](const Kernels& k) {
      Rng rng(seed);
      Tensor a = random(rng, at, {s.M, s.K});
      // Weights ~ U(-r, r) with r = sqrt(3 / K): outputs of unit scale, so GELU/tanh see their curved range.
      const float r = s.K > 0 ? std::sqrt(3.0f / static_cast<float>(s.K)) : 1.0f;
      Tensor w = random(rng, wt, {s.N, s.K}, -r, r);
      Tensor b = random(rng, wt, {s.N}, -0.5f, 0.5f);
      Tensor out = make(at, {s.M, s.N});
      k.linear(out.view, a.view, w.view, bias ? b.view : TensorView{}, act, Accumulate::no);
      return values(out.view);
    };
    cases.push_back(std::move(c));
  };
  for (size_t si = 0; si < shapes.size(); ++si)
    for (size_t pi = 0; pi < kDtypePairs.size(); ++pi)
      add(shapes[si], kDtypePairs[pi].first, kDtypePairs[pi].second, acts[(si + pi) % 3], (si + pi) % 3 != 2, false);
  // Every activation with and without bias on one odd shape; and the widened
  // f32 path of bf16 x bf16 that CPUs without native bf16 take.
  for (DType at : {DType::f32, DType::bf16})
    for (Activation act : acts)
      for (bool bias : {false, true}) add({7, 65, 129}, at, at, act, bias, false);
  for (Shape s : {Shape{1, 3, 7}, Shape{65, 7, 129}, Shape{64, 65, 127}, Shape{3, 16, 3072}})
    add(s, DType::bf16, DType::bf16, Activation::gelu_erf, true, true);
}

void add_layernorm_cases(std::vector<OpCase>& cases) {
  struct Shape {
    int64_t T, H;
  };
  const std::vector<Shape> shapes = {{1, 1},   {1, 3},    {3, 7},     {7, 16},    {16, 63},   {63, 64},
                                     {64, 65}, {65, 127}, {127, 128}, {128, 129}, {129, 768}, {0, 16}};
  for (size_t si = 0; si < shapes.size(); ++si)
    for (size_t pi = 0; pi < kDtypePairs.size(); ++pi) {
      const Shape s = shapes[si];
      const DType at = kDtypePairs[pi].first, wt = kDtypePairs[pi].second;
      const std::string sizes = "_T" + std::to_string(s.T) + "_H" + std::to_string(s.H);
      const float eps = (si % 2) ? 1e-12f : 1e-5f;
      {  // embed_layernorm; type ids given, type table with implicit id 0, or no type table
        const int variant = static_cast<int>((si + pi) % 3);
        OpCase c;
        c.name = std::string("embed_layernorm_") + dname(at) + "_w" + dname(wt) + sizes +
                 (variant == 0   ? "_typeids"
                  : variant == 1 ? "_type0"
                                 : "_notype");
        c.family = std::string("embed_layernorm ") + dname(at);
        c.tol = tolerance(at);
        const uint64_t seed = seed_of(c.name);
        c.run = [=](const Kernels& k) {
          Rng rng(seed);
          const int32_t V = 50, P = 140, TT = 2;
          Tensor word = random(rng, wt, {V, s.H}), pos = random(rng, wt, {P, s.H}, -0.3f, 0.3f),
                 type = random(rng, wt, {TT, s.H}, -0.2f, 0.2f);
          Tensor gamma = random(rng, wt, {s.H}, 0.5f, 1.5f), beta = random(rng, wt, {s.H}, -0.5f, 0.5f);
          std::vector<int32_t> ids, ps, ty;
          for (int64_t t = 0; t < s.T; ++t) {
            ids.push_back(rng.below(V));
            ps.push_back(rng.below(P));
            ty.push_back(rng.below(TT));
          }
          Tensor id = indices(ids), po = indices(ps), tyi = indices(ty);
          Tensor out = make(at, {s.T, s.H});
          // Variant 1 also writes the second copy (the next GEMM's input) in the other dtype.
          Tensor low = make(at == DType::f32 ? DType::bf16 : DType::f32, {s.T, s.H});
          k.embed_layernorm(out.view, id.view, po.view, variant == 0 ? tyi.view : TensorView{}, word.view, pos.view,
                            variant == 2 ? TensorView{} : type.view, gamma.view, beta.view, eps,
                            variant == 1 ? low.view : TensorView{});
          if (variant == 1) expect_copy_is_convert(k, low.view, out.view);
          return values(out.view);
        };
        cases.push_back(std::move(c));
      }
      {  // residual_layernorm; out separate, aliasing x, or aliasing residual
        const int variant = static_cast<int>((si + pi) % 3);
        OpCase c;
        c.name = std::string("residual_layernorm_") + dname(at) + "_w" + dname(wt) + sizes +
                 (variant == 0   ? ""
                  : variant == 1 ? "_outisx"
                                 : "_outisresidual");
        c.family = std::string("residual_layernorm ") + dname(at);
        c.tol = tolerance(at);
        const uint64_t seed = seed_of(c.name);
        c.run = [=](const Kernels& k) {
          Rng rng(seed);
          // An offset mean and a spread that differs per row make the statistics matter.
          Tensor x = random(rng, at, {s.T, s.H}, -2.0f, 3.0f), res = random(rng, at, {s.T, s.H}, -1.0f, 1.0f);
          Tensor gamma = random(rng, wt, {s.H}, 0.5f, 1.5f), beta = random(rng, wt, {s.H}, -0.5f, 0.5f);
          Tensor out = make(at, {s.T, s.H});
          const TensorView& o = variant == 0 ? out.view : variant == 1 ? x.view : res.view;
          Tensor low = make(at == DType::f32 ? DType::bf16 : DType::f32, {s.T, s.H});  // with the separate out
          k.residual_layernorm(o, x.view, res.view, gamma.view, beta.view, eps, variant == 0 ? low.view : TensorView{});
          if (variant == 0) expect_copy_is_convert(k, low.view, o);
          return values(o);
        };
        cases.push_back(std::move(c));
      }
    }
}

void add_bias_gelu_cases(std::vector<OpCase>& cases) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1},   {3, 7},    {7, 16},    {16, 63},  {63, 64},
                                                           {64, 65}, {65, 129}, {127, 128}, {33, 3072}};
  for (size_t si = 0; si < shapes.size(); ++si)
    for (size_t pi = 0; pi < kDtypePairs.size(); ++pi) {
      const int64_t T = shapes[si].first, N = shapes[si].second;
      const DType at = kDtypePairs[pi].first, wt = kDtypePairs[pi].second;
      const bool bias = (si + pi) % 4 != 3;
      OpCase c;
      c.name = std::string("bias_gelu_") + dname(at) + "_w" + dname(wt) + "_T" + std::to_string(T) + "_N" +
               std::to_string(N) + (bias ? "_bias" : "");
      c.family = std::string("bias_gelu ") + dname(at);
      c.tol = tolerance(at);
      const uint64_t seed = seed_of(c.name);
      c.run = [=](const Kernels& k) {
        Rng rng(seed);
        Tensor x = random(rng, at, {T, N}, -6.0f, 6.0f), b = random(rng, wt, {N}, -1.0f, 1.0f);
        k.bias_gelu(x.view, bias ? b.view : TensorView{});
        return values(x.view);
      };
      cases.push_back(std::move(c));
    }
}

void add_attention_cases(std::vector<OpCase>& cases) {
  const std::vector<std::vector<int>> batches = {
      {1}, {3}, {7, 1, 16}, {1, 1, 1}, {63, 64, 65}, {129, 1, 127, 128, 3, 16, 0, 7}, {300}, {0}, {128, 0}};
  const std::vector<std::pair<int, int>> head_dims = {{1, 16}, {2, 32}, {4, 64}, {3, 24}, {12, 64}, {2, 1}, {1, 7}};
  for (const auto& lens : batches)
    for (const auto& hd : head_dims) {
      const int heads = hd.first, d = hd.second;
      double work = 0;  // the reference's multiply-adds: keep the table fast
      for (int n : lens) work += 2.0 * n * n * d * heads;
      if (work > 2.5e7) continue;
      // The fast kernel at the CPU's vector width (16 floats with AVX-512) and at 8, as without it.
      for (DType at : kActs)
        for (int floats : {0, 8}) {
          OpCase c;
          c.name = std::string("attention_") + dname(at) + "_" + lens_name(lens) + "_h" + std::to_string(heads) +
                   "_d" + std::to_string(d) + (floats ? "_v" + std::to_string(floats) : "");
          c.family = std::string("attention ") + dname(at);
          c.tol = tolerance(at);
          c.attention_floats = floats;
          const uint64_t seed = seed_of(c.name);
          c.run = [=](const Kernels& k) {
            Rng rng(seed);
            const int T = total(lens);
            Tensor qkv = random(rng, at, {T, 3 * heads * d}, -2.5f, 2.5f);
            Tensor cu = cu_seqlens(lens);
            Tensor out = make(at, {T, heads * d});
            k.attention(out.view, qkv.view, cu.view, heads, longest(lens), 0);
            return values(out.view);
          };
          cases.push_back(std::move(c));
        }
    }
  // Sliding windows (ModernBERT's local layers): narrower and wider than the
  // sequences, across the fast kernel's 8-row blocks, 16-key tiles and
  // 256-query items.
  for (const auto& lens : std::vector<std::vector<int>>{{7, 1, 16}, {63, 64, 65}, {300}, {129, 1, 127, 0, 3}})
    for (int window : {1, 9, 64})
      for (const auto& [heads, d] : std::vector<std::pair<int, int>>{{3, 24}, {1, 7}})
        for (DType at : kActs)
          for (int floats : {0, 8}) {
            OpCase c;
            c.name = std::string("attention_") + dname(at) + "_" + lens_name(lens) + "_h" + std::to_string(heads) +
                     "_d" + std::to_string(d) + "_w" + std::to_string(window) +
                     (floats ? "_v" + std::to_string(floats) : "");
            c.family = std::string("attention ") + dname(at);
            c.tol = tolerance(at);
            c.attention_floats = floats;
            const uint64_t seed = seed_of(c.name);
            const int hs = heads, dd = d, w = window;
            c.run = [=](const Kernels& k) {
              Rng rng(seed);
              const int T = total(lens);
              Tensor qkv = random(rng, at, {T, 3 * hs * dd}, -2.5f, 2.5f);
              Tensor cu = cu_seqlens(lens);
              Tensor out = make(at, {T, hs * dd});
              k.attention(out.view, qkv.view, cu.view, hs, longest(lens), w);
              return values(out.view);
            };
            cases.push_back(std::move(c));
          }
}

// Grouped-query attention (Qwen2 / Qwen3): (heads, kv_heads, d), causal or
// not, sequences crossing the fast kernel's 128-query items and 8-row blocks.
void add_attention_gqa_cases(std::vector<OpCase>& cases) {
  const std::vector<std::vector<int>> batches = {{1}, {7, 1, 16}, {129, 0, 3, 128}, {300}};
  struct Geometry {
    int heads, kv_heads, d;
  };
  const std::vector<Geometry> geometries = {{4, 2, 24}, {4, 1, 16}, {2, 2, 64}, {6, 3, 7}};
  for (const auto& lens : batches)
    for (const Geometry& g : geometries) {
      double work = 0;  // the reference's multiply-adds: keep the table fast
      for (int n : lens) work += 2.0 * n * n * g.d * g.heads;
      if (work > 1.8e7) continue;
      for (bool causal : {true, false})
        for (DType at : kActs)
          for (int floats : {0, 8}) {
            OpCase c;
            c.name = std::string("attention_gqa_") + dname(at) + "_" + lens_name(lens) + "_h" +
                     std::to_string(g.heads) + "_kv" + std::to_string(g.kv_heads) + "_d" + std::to_string(g.d) +
                     (causal ? "_causal" : "") + (floats ? "_v" + std::to_string(floats) : "");
            c.family = std::string("attention_gqa ") + dname(at);
            c.tol = tolerance(at);
            c.attention_floats = floats;
            const uint64_t seed = seed_of(c.name);
            c.run = [=](const Kernels& k) {
              Rng rng(seed);
              const int T = total(lens), C = (g.heads + 2 * g.kv_heads) * g.d;
              Tensor qkv = random(rng, at, {T, C}, -2.5f, 2.5f);
              Tensor cu = cu_seqlens(lens);
              Tensor out = make(at, {T, g.heads * g.d});
              k.attention_gqa(out.view, qkv.view, cu.view, g.heads, g.kv_heads, causal, longest(lens));
              return values(out.view);
            };
            cases.push_back(std::move(c));
          }
    }
}

void add_pool_cases(std::vector<OpCase>& cases) {
  const std::vector<std::vector<int>> batches = {{1}, {3, 0, 7}, {16, 1, 64, 65, 0, 3, 127, 129}};
  const int64_t hidden[] = {1, 64, 129, 768};
  const Pooling modes[] = {Pooling::cls, Pooling::mean, Pooling::max, Pooling::mean_sqrt_len,
                               Pooling::lasttoken};
  size_t n = 0;
  for (const auto& lens : batches)
    for (Pooling mode : modes)
      for (DType at : kActs) {
        const int64_t H = hidden[n++ % 4];
        OpCase c;
        c.name =
            std::string("pool_") + pname(mode) + "_" + dname(at) + "_" + lens_name(lens) + "_H" + std::to_string(H);
        c.family = std::string("pool ") + dname(at);
        c.tol = tolerance(DType::f32, 129);  // f32 output; sums over up to 129 tokens
        const uint64_t seed = seed_of(c.name);
        c.run = [=](const Kernels& k) {
          Rng rng(seed);
          Tensor h = random(rng, at, {total(lens), H}, -2.0f, 2.0f);
          Tensor cu = cu_seqlens(lens);
          Tensor out = make(DType::f32, {static_cast<int64_t>(lens.size()), H});
          k.pool(out.view, h.view, cu.view, mode);
          return values(out.view);
        };
        cases.push_back(std::move(c));
      }
}

void add_l2_cases(std::vector<OpCase>& cases) {
  for (const auto& bd :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 7}, {8, 768}, {7, 129}, {3, 0}, {0, 5}, {65, 64}}) {
    const int64_t B = bd.first, D = bd.second;
    OpCase c;
    c.name = "l2_normalize_B" + std::to_string(B) + "_D" + std::to_string(D);
    c.family = "l2_normalize f32";
    c.tol = tolerance(DType::f32);
    const uint64_t seed = seed_of(c.name);
    c.run = [=](const Kernels& k) {
      Rng rng(seed);
      Tensor x = random(rng, DType::f32, {B, D}, -3.0f, 3.0f);
      if (B > 1)  // a zero row stays zero (the 1e-12 floor), a tiny one still normalises
        for (int64_t i = 0; i < D; ++i) {
          set(x.view, i, 0.0f);
          set(x.view, D + i, 1e-20f);
        }
      k.l2_normalize(x.view);
      return values(x.view);
    };
    cases.push_back(std::move(c));
  }
}

void add_data_movement_cases(std::vector<OpCase>& cases) {
  size_t n = 0;
  for (DType from : kActs)
    for (DType to : kActs) {
      const std::string dt = std::string(dname(from)) + "_to_" + dname(to);
      for (const auto& bh : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {8, 129}, {3, 768}}) {
        const int64_t B = bh.first, H = bh.second;
        OpCase c;
        c.name = "gather_rows_" + dt + "_B" + std::to_string(B) + "_H" + std::to_string(H);
        c.family = "gather_rows";
        c.exact = true;
        const uint64_t seed = seed_of(c.name);
        c.run = [=](const Kernels& k) {
          Rng rng(seed);
          const int64_t T = 131;
          Tensor h = random(rng, from, {T, H}, -70000.0f, 70000.0f);  // f16 overflows to inf at 65520
          std::vector<int32_t> rows;
          for (int64_t b = 0; b < B; ++b) rows.push_back(rng.below(static_cast<int32_t>(T)));
          Tensor r = indices(rows), out = make(to, {B, H});
          k.gather_rows(out.view, h.view, r.view);
          return values(out.view);
        };
        cases.push_back(std::move(c));
      }
      for (const auto& bdd :
           std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1, 1}, {8, 768, 64}, {3, 129, 0}, {5, 65, 65}}) {
        const int64_t B = std::get<0>(bdd), Din = std::get<1>(bdd), D = std::get<2>(bdd);
        OpCase c;
        c.name =
            "slice_columns_" + dt + "_B" + std::to_string(B) + "_" + std::to_string(Din) + "to" + std::to_string(D);
        c.family = "slice_columns";
        c.exact = true;
        const uint64_t seed = seed_of(c.name);
        c.run = [=](const Kernels& k) {
          Rng rng(seed);
          Tensor in = random(rng, from, {B, Din}, -3.0f, 3.0f), out = make(to, {B, D});
          k.slice_columns(out.view, in.view);
          return values(out.view);
        };
        cases.push_back(std::move(c));
      }
      const int64_t sizes[] = {0, 1, 7, 4096, 4097, 10000};
      for (int rep = 0; rep < 2; ++rep) {
        const int64_t N = sizes[n++ % 6];
        OpCase c;
        c.name = "convert_" + dt + "_N" + std::to_string(N);
        c.family = "convert";
        c.exact = true;
        const uint64_t seed = seed_of(c.name);
        c.run = [=](const Kernels& k) {
          Rng rng(seed);
          Tensor in = make(from, {N});
          // Magnitudes from subnormal to overflow for every target, and signed zeros / infinities.
          const float specials[] = {0.0f,     -0.0f,    INFINITY,    -INFINITY,   1e-40f, 6e-8f,
                                    65519.0f, 65520.0f, 1.00390625f, 1.01171875f, 3.4e38f};
          for (int64_t i = 0; i < N; ++i)
            set(in.view, i, i < 11 ? specials[i] : std::ldexp(rng.uniform(-1.0f, 1.0f), rng.below(60) - 30));
          Tensor out = make(to, {N});
          k.convert(out.view, in.view);
          return values(out.view);
        };
        cases.push_back(std::move(c));
      }
    }
}

std::vector<OpCase> all_cases() {
  std::vector<OpCase> cases;
  add_linear_cases(cases);
  add_layernorm_cases(cases);
  add_bias_gelu_cases(cases);
  add_attention_cases(cases);
  add_attention_gqa_cases(cases);
  add_pool_cases(cases);
  add_l2_cases(cases);
  add_data_movement_cases(cases);
  return cases;
}

// Worst relative error seen per op family, printed after the run.
std::map<std::string, std::pair<double, double>>& worst() {  // family -> (worst error, its tolerance)
  static std::map<std::string, std::pair<double, double>> m;
  return m;
}

class WorstErrorReport : public ::testing::Environment {
 public:
  void TearDown() override {
    if (worst().empty()) return;
    std::printf("worst relative error, fast vs reference:\n");
    for (const auto& [family, e] : worst())
      std::printf("  %-28s %.3g (tolerance %.3g)\n", family.c_str(), e.first, e.second);
  }
};
[[maybe_unused]] ::testing::Environment* const kReport = ::testing::AddGlobalTestEnvironment(new WorstErrorReport);

class FastVsReference : public ::testing::TestWithParam<OpCase> {};

TEST_P(FastVsReference, Matches) {
  const OpCase& c = GetParam();
  const std::vector<double> want = c.run(reference_kernels());
  std::vector<double> got;
  {
    // The fast kernels' test switches this case asks for, put back however it ends.
    struct Switches {
      explicit Switches(const OpCase& c) {
        if (c.force_f32_gemm) fast::set_linear_native_bf16_for_testing(false);
        fast::set_attention_vector_floats_for_testing(c.attention_floats);
      }
      ~Switches() {
        fast::set_linear_native_bf16_for_testing(true);
        fast::set_attention_vector_floats_for_testing(0);
      }
    } switches(c);
    got = c.run(fast_kernels());
  }
  ASSERT_EQ(got.size(), want.size());
  if (c.exact) {
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
    return;
  }
  for (size_t i = 0; i < want.size(); ++i) ASSERT_TRUE(std::isfinite(want[i])) << "reference element " << i;
  const double err = relative_error(got, want);
  auto& w = worst()[c.family];
  if (err >= w.first) w = {err, c.tol};
  EXPECT_LE(err, c.tol) << "relative error of fast against reference";
}

INSTANTIATE_TEST_SUITE_P(Table, FastVsReference, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

// ---- the oracle against hand-computed values ----------------------------------------
// Each runs on both kernel sets; the expected numbers are worked out in the comments.

class HandComputed : public ::testing::TestWithParam<const Kernels*> {
 protected:
  const Kernels& k() const { return *GetParam(); }
};

TEST_P(HandComputed, LinearWithBias) {
  // a = [[1, 2], [3, 4]], w = [[1, 0], [0, 1], [1, 1]] (rows are outputs), bias = [0.5, -1, 0]:
  // row 0: [1 + 0.5, 2 - 1, 1 + 2] = [1.5, 1, 3]; row 1: [3.5, 3, 7].
  for (DType t : kActs) {
    Tensor a = from(t, {2, 2}, {1, 2, 3, 4}), w = from(t, {3, 2}, {1, 0, 0, 1, 1, 1});
    Tensor b = from(t, {3}, {0.5f, -1, 0}), out = make(t, {2, 3});
    k().linear(out.view, a.view, w.view, b.view, Activation::none, Accumulate::no);
    EXPECT_EQ(values(out.view), (std::vector<double>{1.5, 1, 3, 3.5, 3, 7})) << dname(t);
  }
}

TEST_P(HandComputed, LinearActivations) {
  // K = 1, a = 0.5, w = 2, no bias: pre-activation 1 (and -1 for the second column, w = -2).
  // GELU(1) = Phi(1) = 0.841344746068543, GELU(-1) = -Phi(-1) = -0.158655253931457 (normal CDF table);
  // tanh(1) = 0.761594155955765.
  Tensor a = from(DType::f32, {1, 1}, {0.5f}), w = from(DType::f32, {2, 1}, {2, -2});
  Tensor out = make(DType::f32, {1, 2});
  k().linear(out.view, a.view, w.view, TensorView{}, Activation::gelu_erf, Accumulate::no);
  EXPECT_NEAR(get(out.view, 0), 0.841344746068543, 2e-6);
  EXPECT_NEAR(get(out.view, 1), -0.158655253931457, 2e-6);
  k().linear(out.view, a.view, w.view, TensorView{}, Activation::tanh, Accumulate::no);
  EXPECT_NEAR(get(out.view, 0), 0.761594155955765, 2e-6);
  EXPECT_NEAR(get(out.view, 1), -0.761594155955765, 2e-6);
}

TEST_P(HandComputed, GeluAtKnownPoints) {
  // GELU(x) = x Phi(x), Phi from the standard normal table:
  // Phi(2) = 0.977249868051821, Phi(-3) = 0.00134989803163010, Phi(0.5) = 0.691462461274013.
  Tensor x = from(DType::f32, {1, 6}, {0, 1, -1, 2, -3, 0.5f});
  k().bias_gelu(x.view, TensorView{});
  const double want[] = {0.0,
                         0.841344746068543,
                         -0.158655253931457,
                         2 * 0.977249868051821,
                         -3 * 0.00134989803163010,
                         0.5 * 0.691462461274013};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(get(x.view, i), want[i], 2e-6 * std::max(1.0, std::fabs(want[i]))) << i;
  // With a bias: GELU(-0.5 + 1.5) = GELU(1).
  Tensor y = from(DType::f32, {1, 1}, {-0.5f}), b = from(DType::f32, {1}, {1.5f});
  k().bias_gelu(y.view, b.view);
  EXPECT_NEAR(get(y.view, 0), 0.841344746068543, 2e-6);
}

TEST_P(HandComputed, ResidualLayerNormOneToken) {
  // x + residual = [1, 2, 3, 4] + [1, 1, 1, 1] = [2, 3, 4, 5]: mean 3.5, biased variance
  // (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25, eps 0: rstd = 1/sqrt(1.25) = 0.894427190999916;
  // normalised = [-1.5, -0.5, 0.5, 1.5] * rstd = [-1.341640786499874, -0.447213595499958, +0.447..., +1.341...];
  // gamma [1, 2, 1, 1], beta [0, 0, 0, 1] -> [-1.341640786, -0.894427191, 0.447213595, 2.341640786].
  for (DType t : kActs) {
    Tensor x = from(t, {1, 4}, {1, 2, 3, 4}), r = from(t, {1, 4}, {1, 1, 1, 1});
    Tensor g = from(DType::f32, {4}, {1, 2, 1, 1}), b = from(DType::f32, {4}, {0, 0, 0, 1});
    Tensor out = make(t, {1, 4});
    k().residual_layernorm(out.view, x.view, r.view, g.view, b.view, 0.0f, TensorView{});
    const double want[] = {-1.341640786499874, -0.894427190999916, 0.447213595499958, 2.341640786499874};
    const double tol = t == DType::f32 ? 1e-6 : t == DType::bf16 ? 1e-2 : 2e-3;
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(get(out.view, i), want[i], tol) << dname(t) << " " << i;
  }
  // H = 1: the variance is 0, so the output is beta (eps keeps it finite).
  Tensor x = from(DType::f32, {1, 1}, {7}), r = from(DType::f32, {1, 1}, {0});
  Tensor g = from(DType::f32, {1}, {3}), b = from(DType::f32, {1}, {0.25f}), out = make(DType::f32, {1, 1});
  k().residual_layernorm(out.view, x.view, r.view, g.view, b.view, 1e-12f, TensorView{});
  EXPECT_EQ(get(out.view, 0), 0.25);
}

// The second copy a LayerNorm writes is exactly the convert of its output
// (the encoder reads it instead of converting), and it may overlap nothing.
TEST_P(HandComputed, LayerNormSecondCopyIsTheConvertOfItsOutput) {
  Rng rng(77);
  Tensor x = random(rng, DType::f32, {5, 33}, -2.0f, 3.0f), r = random(rng, DType::f32, {5, 33});
  Tensor g = random(rng, DType::f32, {33}, 0.5f, 1.5f), b = random(rng, DType::f32, {33});
  for (DType low_t : {DType::bf16, DType::f16}) {
    Tensor out = make(DType::f32, {5, 33}), low = make(low_t, {5, 33}), want = make(low_t, {5, 33});
    k().residual_layernorm(out.view, x.view, r.view, g.view, b.view, 1e-5f, low.view);
    k().convert(want.view, out.view);
    EXPECT_EQ(values(low.view), values(want.view)) << dname(low_t);
  }
  Tensor out = make(DType::f32, {5, 33});
  EXPECT_THROW(k().residual_layernorm(out.view, x.view, r.view, g.view, b.view, 1e-5f, x.view), Error);
  EXPECT_THROW(k().residual_layernorm(out.view, x.view, r.view, g.view, b.view, 1e-5f, make(DType::f32, {4, 33}).view),
               Error);
}

TEST_P(HandComputed, EmbedLayerNormSumsThreeTables) {
  // Token with id 1, position 0, type 1: word[1] + pos[0] + type[1] = [1, 0] + [0, 2] + [1, 0] = [2, 2]
  // -> variance 0 -> (x - mean) = 0, times rstd = 1/sqrt(eps), -> beta [0.5, 0]; and id 0, position 1,
  // type 0: [0, 0] + [4, 0] + [0, 0] = [4, 0]: mean 2, variance 4 -> [1, -1] * gamma [2, 1] + beta = [2.5, -1].
  // (eps = 0 would make the first row 0 * inf = NaN, as the formula says.)
  Tensor word = from(DType::f32, {2, 2}, {0, 0, 1, 0}), pos = from(DType::f32, {2, 2}, {0, 2, 4, 0});
  Tensor type = from(DType::f32, {2, 2}, {0, 0, 1, 0});
  Tensor g = from(DType::f32, {2}, {2, 1}), b = from(DType::f32, {2}, {0.5f, 0});
  Tensor ids = indices({1, 0}), ps = indices({0, 1}), ty = indices({1, 0}), out = make(DType::f32, {2, 2});
  k().embed_layernorm(out.view, ids.view, ps.view, ty.view, word.view, pos.view, type.view, g.view, b.view, 1e-12f,
                      TensorView{});
  const double want[] = {0.5, 0, 2.5, -1};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(get(out.view, i), want[i], 1e-6) << i;
}

TEST_P(HandComputed, AttentionTwoTokens) {
  // One head, d = 4, so the scale is 1/2. q0 = [2, 0, 0, 0], q1 = 0; k0 = 0, k1 = [ln 3, 0, 0, 0].
  // Query 0: scores [0, 2 ln3 / 2] = [0, ln 3] -> softmax [1/4, 3/4]; query 1: [0, 0] -> [1/2, 1/2].
  // v0 = [4, 0, 1, 2], v1 = [8, 4, 1, -2]: out0 = v0/4 + 3 v1/4 = [7, 3, 1, -1]; out1 = [6, 2, 1, 0].
  const float ln3 = static_cast<float>(std::log(3.0));
  Tensor qkv = from(DType::f32, {2, 12}, {2, 0, 0, 0, 0,   0, 0, 0, 4, 0, 1, 2,  //
                                          0, 0, 0, 0, ln3, 0, 0, 0, 8, 4, 1, -2});
  Tensor cu = cu_seqlens({2}), out = make(DType::f32, {2, 4});
  k().attention(out.view, qkv.view, cu.view, 1, 2, 0);
  const double want[] = {7, 3, 1, -1, 6, 2, 1, 0};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(get(out.view, i), want[i], 1e-5) << i;
}

TEST_P(HandComputed, PoolModes) {
  // H = 1; sequence 0 = [1, 2, 3, 4], sequence 1 empty, sequence 2 = [-5].
  // cls [1, 0, -5]; mean [2.5, 0, -5]; max [4, 0, -5]; mean_sqrt_len [10 / sqrt 4 = 5, 0, -5]; last [4, 0, -5].
  Tensor h = from(DType::f32, {5, 1}, {1, 2, 3, 4, -5}), cu = cu_seqlens({4, 0, 1});
  const std::pair<Pooling, std::vector<double>> want[] = {{Pooling::cls, {1, 0, -5}},
                                                              {Pooling::mean, {2.5, 0, -5}},
                                                              {Pooling::max, {4, 0, -5}},
                                                              {Pooling::mean_sqrt_len, {5, 0, -5}},
                                                              {Pooling::lasttoken, {4, 0, -5}}};
  for (const auto& [mode, expected] : want) {
    Tensor out = from(DType::f32, {3, 1}, {99, 99, 99});  // every row must be written
    k().pool(out.view, h.view, cu.view, mode);
    EXPECT_EQ(values(out.view), expected) << pname(mode);
  }
}

TEST_P(HandComputed, L2Normalize) {
  // [3, 4] / 5 = [0.6, 0.8]; a zero row stays zero.
  Tensor x = from(DType::f32, {2, 2}, {3, 4, 0, 0});
  k().l2_normalize(x.view);
  EXPECT_NEAR(get(x.view, 0), 0.6, 1e-7);
  EXPECT_NEAR(get(x.view, 1), 0.8, 1e-7);
  EXPECT_EQ(get(x.view, 2), 0.0);
  EXPECT_EQ(get(x.view, 3), 0.0);
}

TEST_P(HandComputed, ConvertRoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties to even -> 1.
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even -> 1 + 2^-6 = 1.015625.
  // f16: 65519 rounds to 65504 (the largest half), 65520 overflows to infinity.
  Tensor in = from(DType::f32, {4}, {1.00390625f, 1.01171875f, 65519.0f, 65520.0f});
  Tensor b = make(DType::bf16, {4}), h = make(DType::f16, {4});
  k().convert(b.view, in.view);
  k().convert(h.view, in.view);
  EXPECT_EQ(get(b.view, 0), 1.0);
  EXPECT_EQ(get(b.view, 1), 1.015625);
  EXPECT_EQ(get(h.view, 2), 65504.0);
  EXPECT_EQ(get(h.view, 3), INFINITY);
}

TEST_P(HandComputed, GatherAndSlice) {
  Tensor h = from(DType::f32, {3, 2}, {1, 2, 3, 4, 5, 6}), rows = indices({2, 0}), out = make(DType::f32, {2, 2});
  k().gather_rows(out.view, h.view, rows.view);
  EXPECT_EQ(values(out.view), (std::vector<double>{5, 6, 1, 2}));
  Tensor s = make(DType::f32, {3, 1});
  k().slice_columns(s.view, h.view);
  EXPECT_EQ(values(s.view), (std::vector<double>{1, 3, 5}));
}

TEST_P(HandComputed, RefusesBadCalls) {
  Tensor a = make(DType::f32, {2, 3}), w = make(DType::f32, {4, 5}), out = make(DType::f32, {2, 4});
  EXPECT_THROW(k().linear(out.view, a.view, w.view, TensorView{}, Activation::none, Accumulate::no), Error);  // K mismatch
  Tensor wb = make(DType::bf16, {4, 3});
  EXPECT_THROW(k().linear(out.view, a.view, wb.view, TensorView{}, Activation::none, Accumulate::no), Error);  // bf16 w, f32 a
  Tensor qkv = make(DType::f32, {3, 12}), ao = make(DType::f32, {3, 4});
  Tensor bad_end = cu_seqlens({2}), ok = cu_seqlens({3});
  EXPECT_THROW(k().attention(ao.view, qkv.view, bad_end.view, 1, 3, 0), Error);  // cu_seqlens ends at 2, T = 3
  EXPECT_THROW(k().attention(ao.view, qkv.view, ok.view, 1, 2, 0), Error);       // longer than max_seqlen
  EXPECT_THROW(k().attention(ao.view, qkv.view, ok.view, 5, 3, 0), Error);       // 12 columns != 3 * 5 * d
  Tensor word = make(DType::f32, {4, 2}), pos = make(DType::f32, {4, 2}), g = make(DType::f32, {2});
  Tensor eo = make(DType::f32, {1, 2}), ids = indices({4}), ps = indices({0});
  EXPECT_THROW(k().embed_layernorm(eo.view, ids.view, ps.view, TensorView{}, word.view, pos.view, TensorView{}, g.view,
                                   g.view, 1e-5f, TensorView{}),
               Error);  // id 4 of a 4-row table
  Tensor rows = indices({3}), go = make(DType::f32, {1, 2}), h = make(DType::f32, {3, 2});
  EXPECT_THROW(k().gather_rows(go.view, h.view, rows.view), Error);
}

TEST_P(HandComputed, RotaryRotatesPairsByPosition) {
  // One sequence of 3 tokens, one head of 5 columns rotated over its first 4 (partial: column 4
  // passes), then a column outside the heads (the v part of a qkv row). inv_freq = [1, 0.5]. Each
  // token holds x = [1, 0, 0, 1, 9, 7]. NeoX pairs (0, 2) and (1, 3): (1, 0) at angle p -> (cos p,
  // sin p); (0, 1) at angle p/2 -> (-sin p/2, cos p/2). GPT-J pairs (0, 1) and (2, 3): (1, 0) at p ->
  // (cos p, sin p); (0, 1) at p/2 -> (-sin p/2, cos p/2). Scale 2 doubles the rotated columns.
  Tensor freq = from(DType::f32, {2}, {1.0f, 0.5f}), cu = cu_seqlens({3});
  for (bool interleaved : {false, true})
    for (float scale : {1.0f, 2.0f}) {
      Tensor x = make(DType::f32, {3, 6});
      for (int t = 0; t < 3; ++t)
        for (int i = 0; i < 6; ++i) set(x.view, t * 6 + i, std::vector<float>{1, 0, 0, 1, 9, 7}[i]);
      k().rotary(x.view, cu.view, freq.view, Ops::Rotary{1, 5, interleaved, scale});
      for (int p = 0; p < 3; ++p) {
        const double c = std::cos(p) * scale, sn = std::sin(p) * scale;
        const double c2 = std::cos(p / 2.0) * scale, s2 = std::sin(p / 2.0) * scale;
        const std::vector<double> want = interleaved ? std::vector<double>{c, sn, -s2, c2, 9, 7}
                                                     : std::vector<double>{c, -s2, sn, c2, 9, 7};
        for (int i = 0; i < 6; ++i)
          EXPECT_NEAR(get(x.view, p * 6 + i), want[static_cast<size_t>(i)], 1e-6)
              << "interleaved " << interleaved << " scale " << scale << " p " << p << " column " << i;
      }
    }
}

TEST_P(HandComputed, RotaryBackwardUndoesTheRotation) {
  // The rotation is orthogonal: its backward (the transpose) applied to its output gives the input back.
  Tensor freq = make(DType::f32, {5}), cu = cu_seqlens({4, 0, 5});
  for (int i = 0; i < 5; ++i) set(freq.view, i, std::pow(100.0, -i / 5.0));
  for (bool interleaved : {false, true}) {
    Rng rng(19), same(19);
    Tensor x = random(rng, DType::f32, {9, 72}), y = random(same, DType::f32, {9, 72});
    k().rotary(y.view, cu.view, freq.view, Ops::Rotary{4, 12, interleaved, 1.0f});
    EXPECT_GT(std::fabs(get(y.view, 72 + 1) - get(x.view, 72 + 1)), 1e-3);  // position 1 moved
    k().rotary_backward(y.view, cu.view, freq.view, Ops::Rotary{4, 12, interleaved, 1.0f});
    for (int64_t i = 0; i < x.view.numel(); ++i) ASSERT_NEAR(get(y.view, i), get(x.view, i), 1e-6) << i;
  }
}

TEST_P(HandComputed, RotaryRefusesBadCalls) {
  Tensor x = make(DType::f32, {3, 8}), cu = cu_seqlens({3}), freq = make(DType::f32, {2});
  EXPECT_THROW(k().rotary(x.view, cu.view, freq.view, Ops::Rotary{3, 3, false, 1.0f}), Error);  // 9 > 8 columns
  EXPECT_THROW(k().rotary(x.view, cu.view, freq.view, Ops::Rotary{2, 3, false, 1.0f}), Error);  // 4 rotated > 3
  EXPECT_THROW(k().rotary(x.view, cu_seqlens({2}).view, freq.view, Ops::Rotary{2, 4, false, 1.0f}), Error);
  Tensor f64 = make(DType::f64, {2});
  EXPECT_THROW(k().rotary(x.view, cu.view, f64.view, Ops::Rotary{2, 4, false, 1.0f}), Error);
  EXPECT_THROW(k().rotary_backward(x.view, cu.view, freq.view, Ops::Rotary{2, 0, false, 1.0f}), Error);
}

TEST_P(HandComputed, GluActivationsAtKnownPoints) {
  // silu(1) = 1 / (1 + e^-1) = 0.731058578630005; silu(-2) = -2 / (1 + e^2) = -0.238405844044235;
  // GELU(1) = 0.841344746068543. Rows [g | u] and [u | g] with u = 2 and u = -0.5.
  const double silu1 = 0.731058578630005, silu_m2 = -0.238405844044235, gelu1 = 0.841344746068543;
  Tensor first = from(DType::f32, {1, 4}, {1, -2, 2, -0.5f}), second = from(DType::f32, {1, 4}, {2, -0.5f, 1, -2});
  Tensor out = make(DType::f32, {1, 2});
  for (bool act_second : {false, true}) {
    const TensorView x = act_second ? second.view : first.view;
    k().glu(out.view, x, Ops::Glu{Ops::Glu::Act::silu, act_second});
    EXPECT_NEAR(get(out.view, 0), 2 * silu1, 2e-6) << act_second;
    EXPECT_NEAR(get(out.view, 1), -0.5 * silu_m2, 2e-6) << act_second;
    k().glu(out.view, x, Ops::Glu{Ops::Glu::Act::gelu_erf, act_second});
    EXPECT_NEAR(get(out.view, 0), 2 * gelu1, 2e-6) << act_second;
  }
  Tensor odd = make(DType::f32, {1, 5}), small = make(DType::f32, {1, 1});
  EXPECT_THROW(k().glu(out.view, odd.view, Ops::Glu{}), Error);    // 5 columns: not two halves
  EXPECT_THROW(k().glu(small.view, first.view, Ops::Glu{}), Error);  // out must be [1, 2]
  EXPECT_THROW(k().glu_backward(odd.view, out.view, first.view, Ops::Glu{}), Error);
}

INSTANTIATE_TEST_SUITE_P(Kernels, HandComputed, ::testing::Values(&reference_kernels(), &fast_kernels()),
                         [](const ::testing::TestParamInfo<const Kernels*>& info) {
                           return std::string(info.param->name) == "cpu-ref" ? "ref" : "fast";
                         });

// ---- independence of the sequences in a batch ------------------------------------------

TEST(AttentionIsolation, SequenceAloneEqualsSequenceInBatch) {
  // The middle sequence of a batch, and the same tokens alone: identical outputs, bit for bit,
  // whatever the neighbours hold (varlen attention reads only the sequence's own rows) — with a
  // sliding window too (ModernBERT's local layers: the window counts positions in the sequence).
  for (const Kernels* k : {&reference_kernels(), &fast_kernels()})
    for (DType t : kActs)
      for (int window : {0, 6})
      for (auto [heads, d] : std::vector<std::pair<int, int>>{{2, 16}, {3, 24}}) {
        Rng rng(7);
        const std::vector<int> lens = {5, 70, 1, 33};
        const int T = total(lens), C = 3 * heads * d;
        Tensor qkv = random(rng, t, {T, C}, -2.5f, 2.5f), cu = cu_seqlens(lens), out = make(t, {T, heads * d});
        k->attention(out.view, qkv.view, cu.view, heads, 70, window);
        const int first = 5, len = 70;  // sequence 1
        Tensor alone = make(t, {len, C});
        std::memcpy(alone.view.data, static_cast<char*>(qkv.view.data) + size_t(first) * C * dtype_size(t),
                    size_t(len) * C * dtype_size(t));
        Tensor cu1 = cu_seqlens({len}), out1 = make(t, {len, heads * d});
        k->attention(out1.view, alone.view, cu1.view, heads, len, window);
        const std::vector<double> batch = values(out.view), single = values(out1.view);
        for (int i = 0; i < len * heads * d; ++i)
          ASSERT_EQ(batch[static_cast<size_t>(first * heads * d + i)], single[static_cast<size_t>(i)])
              << k->name << " " << dname(t) << " window " << window << " element " << i;
        // Changing the other sequences changes nothing in this one.
        Tensor noisy = random(rng, t, {T, C}, -9.0f, 9.0f);
        std::memcpy(static_cast<char*>(noisy.view.data) + size_t(first) * C * dtype_size(t), alone.view.data,
                    size_t(len) * C * dtype_size(t));
        k->attention(out.view, noisy.view, cu.view, heads, 70, window);
        const std::vector<double> again = values(out.view);
        for (int i = 0; i < len * heads * d; ++i)
          ASSERT_EQ(again[static_cast<size_t>(first * heads * d + i)], single[static_cast<size_t>(i)]);
      }
}

// A local layer's query i sees keys |i - j| <= w: its output is global
// attention over those keys alone, packed as a sequence of their own (the
// attention op has no positions of its own; rotary is applied before it).
TEST(AttentionWindow, EqualsGlobalAttentionOverTheWindowsKeys) {
  for (const Kernels* k : {&reference_kernels(), &fast_kernels()})
    for (int window : {1, 5, 40}) {
      Rng rng(11);
      const int heads = 2, d = 24, len = 83, C = 3 * heads * d;
      Tensor qkv = random(rng, DType::f32, {len, C}, -2.5f, 2.5f), cu = cu_seqlens({len});
      Tensor out = make(DType::f32, {len, heads * d});
      k->attention(out.view, qkv.view, cu.view, heads, len, window);
      const std::vector<double> local = values(out.view);
      for (int i : {0, 1, 7, 41, 82}) {
        const int first = std::max(0, i - window), last = std::min(len, i + window + 1), n = last - first;
        Tensor part = make(DType::f32, {n, C}), cu1 = cu_seqlens({n}), out1 = make(DType::f32, {n, heads * d});
        std::memcpy(part.view.data, static_cast<float*>(qkv.view.data) + size_t(first) * C, size_t(n) * C * 4);
        k->attention(out1.view, part.view, cu1.view, heads, n, 0);
        const std::vector<double> global = values(out1.view);
        for (int c = 0; c < heads * d; ++c)
          ASSERT_NEAR(local[size_t(i * heads * d + c)], global[size_t((i - first) * heads * d + c)], 1e-5)
              << k->name << " window " << window << " query " << i << " column " << c;
      }
    }
}

TEST(AttentionGqaIsolation, SequenceAloneEqualsSequenceInBatch) {
  // As above for grouped-query attention, causal and not: a sequence's output is
  // the same bits alone as between others (4 query heads on 2 k/v heads, d = 24).
  const int heads = 4, kv = 2, d = 24, C = (heads + 2 * kv) * d;
  for (const Kernels* k : {&reference_kernels(), &fast_kernels()})
    for (DType t : kActs)
      for (bool causal : {true, false}) {
        Rng rng(9);
        const std::vector<int> lens = {5, 140, 1, 33};
        const int T = total(lens), first = 5, len = 140;
        Tensor qkv = random(rng, t, {T, C}, -2.5f, 2.5f), cu = cu_seqlens(lens), out = make(t, {T, heads * d});
        k->attention_gqa(out.view, qkv.view, cu.view, heads, kv, causal, 140);
        Tensor alone = make(t, {len, C});
        std::memcpy(alone.view.data, static_cast<char*>(qkv.view.data) + size_t(first) * C * dtype_size(t),
                    size_t(len) * C * dtype_size(t));
        Tensor cu1 = cu_seqlens({len}), out1 = make(t, {len, heads * d});
        k->attention_gqa(out1.view, alone.view, cu1.view, heads, kv, causal, len);
        const std::vector<double> batch = values(out.view), single = values(out1.view);
        for (int i = 0; i < len * heads * d; ++i)
          ASSERT_EQ(batch[static_cast<size_t>(first * heads * d + i)], single[static_cast<size_t>(i)])
              << k->name << " " << dname(t) << (causal ? " causal" : "") << " element " << i;
      }
}

TEST(AttentionGqa, CausalFirstTokenSeesItselfOnly) {
  // Query 0 of a causal sequence attends to key 0 alone: its output is its own v, exactly
  // (one weight of 1), for every query head of the group.
  const int heads = 4, kv = 2, d = 24, C = (heads + 2 * kv) * d;
  for (const Kernels* k : {&reference_kernels(), &fast_kernels()}) {
    Rng rng(5);
    Tensor qkv = random(rng, DType::f32, {9, C}, -2.5f, 2.5f), cu = cu_seqlens({9}), out = make(DType::f32, {9, heads * d});
    k->attention_gqa(out.view, qkv.view, cu.view, heads, kv, true, 9);
    const std::vector<double> o = values(out.view), x = values(qkv.view);
    for (int h = 0; h < heads; ++h)
      for (int c = 0; c < d; ++c)
        ASSERT_EQ(o[static_cast<size_t>(h * d + c)], x[static_cast<size_t>((heads + kv + h / 2) * d + c)]) << k->name;
  }
}

TEST(RotaryIsolation, SequenceAloneEqualsSequenceInBatch) {
  // Positions restart at 0 in every sequence: the last sequence of a batch, rotated alone,
  // gives its rows of the batch bit for bit.
  for (const Kernels* k : {&reference_kernels(), &fast_kernels()})
    for (DType t : kActs) {
      Rng rng(5);
      Tensor batch = random(rng, t, {12, 40}), freq = make(DType::f32, {3});
      for (int i = 0; i < 3; ++i) set(freq.view, i, std::pow(10000.0, -2.0 * i / 8.0));
      Tensor alone = make(t, {5, 40});
      for (int64_t i = 0; i < 5 * 40; ++i) set(alone.view, i, get(batch.view, 7 * 40 + i));
      const Ops::Rotary rope{4, 8, false, 1.0f};
      k->rotary(batch.view, cu_seqlens({3, 4, 5}).view, freq.view, rope);
      k->rotary(alone.view, cu_seqlens({5}).view, freq.view, rope);
      for (int64_t i = 0; i < 5 * 40; ++i)
        ASSERT_EQ(get(alone.view, i), get(batch.view, 7 * 40 + i)) << k->name << " " << dname(t) << " " << i;
    }
}

TEST(RotaryFrequencies, DefaultRopeMatchesTorch) {
  // transformers' compute_default_rope_parameters(dim 12, theta 10000) under torch 2.x, as f32 bit patterns.
  const std::vector<float> torch = {0x1p+0f, 0x1.b93a6ap-3f, 0x1.7c3d2ap-5f, 0x1.47ae14p-7f, 0x1.1a62d2p-9f,
                                    0x1.e6b4b8p-12f};
  EXPECT_EQ(default_rope_inv_freq(12, 10000.0), torch);
  EXPECT_THROW(default_rope_inv_freq(7, 10000.0), Error);
  EXPECT_THROW(default_rope_inv_freq(8, 0.0), Error);
}

TEST(PoolIsolation, SequenceAloneEqualsSequenceInBatch) {
  for (const Kernels* k : {&reference_kernels(), &fast_kernels()}) {
    Rng rng(11);
    const std::vector<int> lens = {3, 9, 0, 4};
    Tensor h = random(rng, DType::bf16, {total(lens), 65}), cu = cu_seqlens(lens), out = make(DType::f32, {4, 65});
    k->pool(out.view, h.view, cu.view, Pooling::mean);
    Tensor alone = make(DType::bf16, {9, 65});
    std::memcpy(alone.view.data, static_cast<char*>(h.view.data) + 3 * 65 * 2, 9 * 65 * 2);
    Tensor cu1 = cu_seqlens({9}), out1 = make(DType::f32, {1, 65});
    k->pool(out1.view, alone.view, cu1.view, Pooling::mean);
    const auto all = values(out.view), one = values(out1.view);
    for (int i = 0; i < 65; ++i) ASSERT_EQ(all[static_cast<size_t>(65 + i)], one[static_cast<size_t>(i)]) << k->name;
  }
}

// ---- the GEMM primitive cache --------------------------------------------------------------

TEST(FastLinear, ReusesCachedPrimitives) {
  Rng rng(3);
  Tensor a = random(rng, DType::f32, {11, 13}), w = random(rng, DType::f32, {17, 13}), out = make(DType::f32, {11, 17});
  fast_kernels().linear(out.view, a.view, w.view, TensorView{}, Activation::none, Accumulate::no);
  const size_t n = fast::linear_cached_primitives();
  for (int i = 0; i < 3; ++i) fast_kernels().linear(out.view, a.view, w.view, TensorView{}, Activation::none, Accumulate::no);
  EXPECT_EQ(fast::linear_cached_primitives(), n);  // same shape: no new primitive
  Tensor a2 = random(rng, DType::f32, {12, 13}), out2 = make(DType::f32, {12, 17});
  fast_kernels().linear(out2.view, a2.view, w.view, TensorView{}, Activation::none, Accumulate::no);
  EXPECT_EQ(fast::linear_cached_primitives(), std::min<size_t>(n + 1, 256));  // a new M: one more
}

TEST(CpuFeatures, Bf16SupportIsNamed) {
  const std::string s = cpu_bf16_support();
  EXPECT_TRUE(s == "bf16 (AMX)" || s == "bf16 (AVX512-BF16)" || s == "f32 only") << s;
  EXPECT_EQ(cpu_has_native_bf16(), s != "f32 only");
  std::printf("fast GEMM on this CPU: %s\n", s.c_str());
}

}  // namespace
}  // namespace stoke::cpu
