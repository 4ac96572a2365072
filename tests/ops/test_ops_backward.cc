// The training ops of the CPU op table (backend/op_list.h, "training" block):
//
// 1. Finite differences: small float64 forward functions written here, apart
//    from the kernels, give central differences of a random scalar loss
//    L = sum(dy * f(inputs)) with respect to every input element; the
//    reference kernels' gradients must match them (all activation and
//    parameter gradients: da, dw, db, dx, dgamma, dbeta, dword, dpos, dtype,
//    dqkv, dh), attention also with dropout on the probabilities.
// 2. Fast against reference, every backward op and training forward over
//    awkward sizes (T in {1, 3, 7, 64, 65}, uneven sequences with length 1,
//    hidden 16/48/64, heads 1/2/4, head dims 8/16/24); attention also with
//    dropout p = 0.1 and 0.5 on the probabilities.
// 3. Semantics: parameter gradients accumulate (two calls give exactly twice
//    one), the training forwards give the inference forwards' outputs bit for
//    bit, and the reductions and scatter-adds are bitwise reproducible.
//    Attention dropout: its mask is the dropout op's over the flat index
//    ((row_offset + t) * heads + h) * 2^32 + j, a batch split in two with
//    row offsets draws the whole batch's masks, p = 0 is bitwise no dropout,
//    p = 1 gives zeros, p outside [0, 1] is refused.
//
// Finite-difference tolerance (relative error ||g - g_fd|| / ||g_fd|| over a
// whole gradient): 1e-6. The reference kernels compute in double from inputs
// that are exact f32 values and round each gradient once to f32 (2^-24 ~
// 6e-8 relative per element); what backward reads from the forward (mean,
// rstd, lse, out, pre, y) is stored in f32 too, each adding an error of a few
// 2^-24 scaled by how sensitive the gradient is to it (modest for the value
// ranges used here: scores within a few units, tanh inputs within +-1.5 so
// 1 - y^2 >= 0.18). The differences themselves are taken in f64 with step
// h = 1e-6: truncation ~h^2 |f'''| ~ 1e-12, cancellation ~1e-16 |L| / h ~ 1e-9
// relative. So f32 rounding dominates, and 1e-6 (~16 x 2^-24) leaves a few
// times the expected error while still catching any wrong term (a missing
// term is an O(1) error).
//
// Fast-vs-reference tolerances follow tests/ops/test_ops.cc: f32 max(1e-5,
// 16 u sqrt(K)) for a reduction of length K (u = 2^-24); bf16 2e-2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <utility>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/philox.h"
#include "cpu/fast/fast_ops.h"
#include "cpu/kernels.h"
#include "support/host_tensors.h"

namespace stoke::cpu {
namespace {

// ---- host tensors (as tests/ops/test_ops.cc) ------------------------------------

using Tensor = test::host_tensors::HostTensor;  // storage + view (support/host_tensors.h)
using test::host_tensors::get;
using test::host_tensors::set;
Tensor make(DType t, std::vector<int64_t> shape) { return test::host_tensors::host_tensor(t, std::move(shape)); }
Tensor indices(const std::vector<int32_t>& v) { return test::host_tensors::index_tensor(v); }

std::vector<double> values(const TensorView& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = get(t, i);
  return v;
}

Tensor copy_of(const Tensor& t) {
  Tensor c = t;
  c.view.data = c.storage.data();
  return c;
}

using Rng = test::host_tensors::Rng;  // splitmix64 (support/host_tensors.h)

Tensor random(Rng& rng, DType t, std::vector<int64_t> shape, float lo = -1.0f, float hi = 1.0f) {
  Tensor x = make(t, std::move(shape));
  for (int64_t i = 0; i < x.view.numel(); ++i) set(x.view, i, rng.uniform(lo, hi));
  return x;
}

std::vector<int32_t> random_ids(Rng& rng, int64_t n, int32_t limit) {
  std::vector<int32_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(rng.below(limit));
  return v;
}

Tensor cu_seqlens(const std::vector<int>& lens) {
  std::vector<int32_t> cu{0};
  for (int n : lens) cu.push_back(cu.back() + n);
  return indices(cu);
}
int total(const std::vector<int>& lens) { return std::accumulate(lens.begin(), lens.end(), 0); }
int longest(const std::vector<int>& lens) { return lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end()); }

std::string lens_name(const std::vector<int>& lens) {
  std::string s = "L";
  for (size_t i = 0; i < lens.size(); ++i) {
    if (i) s += '_';  // (not `(i ? "_" : "") + ...`: GCC 12 warns falsely on that, -Wrestrict)
    s += std::to_string(lens[i]);
  }
  return s;
}
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
const char* dname(DType t) { return t == DType::f32 ? "f32" : t == DType::bf16 ? "bf16" : "f16"; }

double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  if (norm == 0.0) return std::sqrt(diff);
  return std::sqrt(diff / norm);
}

const Kernels& ref() { return reference_kernels(); }
const Kernels& fast() { return fast_kernels(); }

// Worst errors per check, printed at the end (the numbers the commit reports).
std::map<std::string, std::pair<double, double>>& worst() {
  static std::map<std::string, std::pair<double, double>> m;
  return m;
}
void note(const std::string& family, double err, double tol) {
  auto& w = worst()[family];
  if (err >= w.first) w = {err, tol};
}
class Report : public ::testing::Environment {
 public:
  void TearDown() override {
    if (worst().empty()) return;
    std::printf("worst relative error per check:\n");
    for (const auto& [family, e] : worst())
      std::printf("  %-40s %.3g (tolerance %.3g)\n", family.c_str(), e.first, e.second);
  }
};
[[maybe_unused]] ::testing::Environment* const kReport = ::testing::AddGlobalTestEnvironment(new Report);

// ---- float64 forwards (independent of the kernels) -----------------------------------

using Vec = std::vector<double>;

// out[M,N] = a[M,K] w[N,K]^T + b[N]
Vec linear64(const Vec& a, const Vec& w, const Vec& b, int64_t M, int64_t N, int64_t K) {
  Vec out(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = b.empty() ? 0.0 : b[static_cast<size_t>(n)];
      for (int64_t k = 0; k < K; ++k) acc += a[static_cast<size_t>(m * K + k)] * w[static_cast<size_t>(n * K + k)];
      out[static_cast<size_t>(m * N + n)] = acc;
    }
  return out;
}

// Row-wise LayerNorm of s[T,H] (biased variance).
Vec layernorm64(const Vec& s, const Vec& gamma, const Vec& beta, int64_t T, int64_t H, double eps) {
  Vec out(s.size());
  for (int64_t t = 0; t < T; ++t) {
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < H; ++i) mean += s[static_cast<size_t>(t * H + i)];
    mean /= static_cast<double>(H);
    for (int64_t i = 0; i < H; ++i) {
      const double c = s[static_cast<size_t>(t * H + i)] - mean;
      var += c * c;
    }
    const double rstd = 1.0 / std::sqrt(var / static_cast<double>(H) + eps);
    for (int64_t i = 0; i < H; ++i)
      out[static_cast<size_t>(t * H + i)] =
          (s[static_cast<size_t>(t * H + i)] - mean) * rstd * gamma[static_cast<size_t>(i)] + beta[static_cast<size_t>(i)];
  }
  return out;
}

double gelu64(double u) { return 0.5 * u * (1.0 + std::erf(u / std::sqrt(2.0))); }

// The attention-probability dropout factors of backend/ops.h written out from
// the Philox layout, into a dense array: m[(t * heads + h) * max_seqlen + j] =
// f32(1 / (1 - p)) if element_uniform at ((row_offset + t) * heads + h) * 2^32
// + j is >= p, else 0, for every t, h and j < max_seqlen.
Vec attention_mask64(const Ops::AttentionDropout& drop, int64_t T, int64_t heads, int64_t max_seqlen) {
  const float scale = drop.p < 1.0f ? 1.0f / (1.0f - drop.p) : 0.0f;
  Vec m(static_cast<size_t>(T * heads * max_seqlen));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < max_seqlen; ++j) {
        const uint64_t index = ((drop.row_offset + static_cast<uint64_t>(t)) * static_cast<uint64_t>(heads) +
                                static_cast<uint64_t>(h)) * (uint64_t{1} << 32) + static_cast<uint64_t>(j);
        const float u = philox::element_uniform(drop.seed, drop.step.host_value(), drop.tensor_id, index);
        m[static_cast<size_t>((t * heads + h) * max_seqlen + j)] = u >= drop.p ? scale : 0.0;
      }
  return m;
}

// Multi-head varlen attention over qkv[T, 3*heads*d]; with a mask (from
// attention_mask64, row stride max_seqlen), out_i = sum_j P_ij m_ij v_j.
Vec attention64(const Vec& qkv, const std::vector<int>& lens, int64_t heads, int64_t d, const Vec* mask = nullptr,
                int64_t max_seqlen = 0) {
  const int64_t C = 3 * heads * d, D = heads * d, T = total(lens);
  Vec out(static_cast<size_t>(T * D));
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  int64_t first = 0;
  for (int len : lens) {
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < len; ++i) {
        Vec s(static_cast<size_t>(len));
        double mx = -INFINITY;
        for (int64_t j = 0; j < len; ++j) {
          double acc = 0.0;
          for (int64_t c = 0; c < d; ++c)
            acc += qkv[static_cast<size_t>((first + i) * C + h * d + c)] *
                   qkv[static_cast<size_t>((first + j) * C + D + h * d + c)];
          s[static_cast<size_t>(j)] = acc * scale;
          mx = std::max(mx, acc * scale);
        }
        double sum = 0.0;
        for (auto& v : s) sum += (v = std::exp(v - mx));
        for (int64_t c = 0; c < d; ++c) {
          double o = 0.0;
          for (int64_t j = 0; j < len; ++j) {
            const double m = mask ? (*mask)[static_cast<size_t>(((first + i) * heads + h) * max_seqlen + j)] : 1.0;
            o += s[static_cast<size_t>(j)] * m * qkv[static_cast<size_t>((first + j) * C + 2 * D + h * d + c)];
          }
          out[static_cast<size_t>((first + i) * D + h * d + c)] = o / sum;
        }
      }
    first += len;
  }
  return out;
}

Vec pool64(const Vec& h, const std::vector<int>& lens, int64_t H, Pooling mode) {
  Vec out(lens.size() * static_cast<size_t>(H), 0.0);
  int64_t first = 0;
  for (size_t b = 0; b < lens.size(); ++b) {
    const int64_t len = lens[b];
    for (int64_t i = 0; i < H && len > 0; ++i) {
      auto at = [&](int64_t t) { return h[static_cast<size_t>((first + t) * H + i)]; };
      double v = 0.0;
      switch (mode) {
        case Pooling::cls: v = at(0); break;
        case Pooling::lasttoken: v = at(len - 1); break;
        case Pooling::max:
          v = at(0);
          for (int64_t t = 1; t < len; ++t) v = std::max(v, at(t));
          break;
        case Pooling::mean:
        case Pooling::mean_sqrt_len:
          for (int64_t t = 0; t < len; ++t) v += at(t);
          v /= mode == Pooling::mean ? static_cast<double>(len) : std::sqrt(static_cast<double>(len));
          break;
      }
      out[b * static_cast<size_t>(H) + static_cast<size_t>(i)] = v;
    }
    first += len;
  }
  return out;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Central differences of loss() with respect to every element of *x.
Vec numeric_grad(Vec* x, const std::function<double()>& loss) {
  constexpr double h = 1e-6;
  Vec g(x->size());
  for (size_t i = 0; i < x->size(); ++i) {
    const double keep = (*x)[i];
    (*x)[i] = keep + h;
    const double up = loss();
    (*x)[i] = keep - h;
    const double down = loss();
    (*x)[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

constexpr double kFdTolerance = 1e-6;

void expect_matches_fd(const std::string& what, const Vec& analytic, const Vec& numeric) {
  ASSERT_EQ(analytic.size(), numeric.size()) << what;
  double norm = 0.0;
  for (double v : numeric) norm += v * v;
  ASSERT_GT(norm, 0.0) << what << ": the numeric gradient is all zero, the check would be empty";
  const double err = relative_error(analytic, numeric);
  note("fd " + what, err, kFdTolerance);
  EXPECT_LE(err, kFdTolerance) << what << ": reference backward against central differences";
}

// ---- 1. finite differences against the reference kernels ------------------------------

TEST(FiniteDifference, Linear) {
  Rng rng(1);
  const int64_t M = 5, N = 4, K = 6;
  Tensor a = random(rng, DType::f32, {M, K}), w = random(rng, DType::f32, {N, K}), b = random(rng, DType::f32, {N});
  Tensor dy = random(rng, DType::f32, {M, N});
  Tensor da = make(DType::f32, {M, K}), dw = make(DType::f32, {N, K}), db = make(DType::f32, {N});
  ref().linear_backward(da.view, dw.view, db.view, dy.view, a.view, w.view, Accumulate::no);
  Vec av = values(a.view), wv = values(w.view), bv = values(b.view), g = values(dy.view);
  auto loss = [&] { return dot(g, linear64(av, wv, bv, M, N, K)); };
  expect_matches_fd("linear da", values(da.view), numeric_grad(&av, loss));
  expect_matches_fd("linear dw", values(dw.view), numeric_grad(&wv, loss));
  expect_matches_fd("linear db", values(db.view), numeric_grad(&bv, loss));
}

TEST(FiniteDifference, ResidualLayerNorm) {
  Rng rng(2);
  const int64_t T = 4, H = 6;
  const float eps = 1e-5f;
  Tensor x = random(rng, DType::f32, {T, H}, -2.0f, 3.0f), r = random(rng, DType::f32, {T, H});
  Tensor gamma = random(rng, DType::f32, {H}, 0.5f, 1.5f), beta = random(rng, DType::f32, {H}, -0.5f, 0.5f);
  Tensor out = make(DType::f32, {T, H}), mean = make(DType::f32, {T}), rstd = make(DType::f32, {T});
  ref().residual_layernorm_train(out.view, mean.view, rstd.view, x.view, r.view, gamma.view, beta.view, eps);
  Tensor dy = random(rng, DType::f32, {T, H});
  Tensor dx = make(DType::f32, {T, H}), dg = make(DType::f32, {H}), dbt = make(DType::f32, {H});
  ref().layernorm_backward(dx.view, dg.view, dbt.view, dy.view, x.view, r.view, mean.view, rstd.view, gamma.view,
                           Accumulate::no);
  Vec xv = values(x.view), rv = values(r.view), gv = values(gamma.view), bv = values(beta.view), g = values(dy.view);
  auto loss = [&] {
    Vec s(xv.size());
    for (size_t i = 0; i < s.size(); ++i) s[i] = xv[i] + rv[i];
    return dot(g, layernorm64(s, gv, bv, T, H, eps));
  };
  expect_matches_fd("layernorm dx", values(dx.view), numeric_grad(&xv, loss));
  expect_matches_fd("layernorm dx as dresidual", values(dx.view), numeric_grad(&rv, loss));
  expect_matches_fd("layernorm dgamma", values(dg.view), numeric_grad(&gv, loss));
  expect_matches_fd("layernorm dbeta", values(dbt.view), numeric_grad(&bv, loss));
}

TEST(FiniteDifference, EmbedLayerNorm) {
  Rng rng(3);
  const int64_t T = 7, H = 5, V = 4, P = 6, TT = 2;
  const float eps = 1e-5f;
  Tensor word = random(rng, DType::f32, {V, H}), pos = random(rng, DType::f32, {P, H}, -0.5f, 0.5f),
         type = random(rng, DType::f32, {TT, H}, -0.3f, 0.3f);
  Tensor gamma = random(rng, DType::f32, {H}, 0.5f, 1.5f), beta = random(rng, DType::f32, {H}, -0.5f, 0.5f);
  // Repeated ids, positions and types: the scatter-add must sum them.
  const std::vector<int32_t> idv = {1, 3, 1, 0, 1, 3, 2}, psv = {0, 1, 2, 0, 1, 2, 5}, tyv = {0, 0, 1, 1, 0, 1, 1};
  Tensor ids = indices(idv), ps = indices(psv), ty = indices(tyv);
  Tensor out = make(DType::f32, {T, H}), mean = make(DType::f32, {T}), rstd = make(DType::f32, {T});
  ref().embed_layernorm_train(out.view, mean.view, rstd.view, ids.view, ps.view, ty.view, word.view, pos.view,
                              type.view, gamma.view, beta.view, eps);
  Tensor dy = random(rng, DType::f32, {T, H});
  Tensor dword = make(DType::f32, {V, H}), dpos = make(DType::f32, {P, H}), dtype = make(DType::f32, {TT, H});
  Tensor dg = make(DType::f32, {H}), dbt = make(DType::f32, {H});
  ref().embed_layernorm_backward(dword.view, dpos.view, dtype.view, dg.view, dbt.view, dy.view, ids.view, ps.view,
                                 ty.view, word.view, pos.view, type.view, mean.view, rstd.view, gamma.view);
  Vec wv = values(word.view), pv = values(pos.view), tv = values(type.view), gv = values(gamma.view),
      bv = values(beta.view), g = values(dy.view);
  auto loss = [&] {
    Vec s(static_cast<size_t>(T * H));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < H; ++i)
        s[static_cast<size_t>(t * H + i)] = wv[static_cast<size_t>(idv[t] * H + i)] +
                                            pv[static_cast<size_t>(psv[t] * H + i)] +
                                            tv[static_cast<size_t>(tyv[t] * H + i)];
    return dot(g, layernorm64(s, gv, bv, T, H, eps));
  };
  expect_matches_fd("embed dword", values(dword.view), numeric_grad(&wv, loss));
  expect_matches_fd("embed dpos", values(dpos.view), numeric_grad(&pv, loss));
  expect_matches_fd("embed dtype", values(dtype.view), numeric_grad(&tv, loss));
  expect_matches_fd("embed dgamma", values(dg.view), numeric_grad(&gv, loss));
  expect_matches_fd("embed dbeta", values(dbt.view), numeric_grad(&bv, loss));
  for (int64_t i = 0; i < H; ++i) EXPECT_EQ(get(dpos.view, 3 * H + i), 0.0) << "position 3 is never read";
  for (int64_t i = 0; i < H; ++i) EXPECT_EQ(get(dpos.view, 4 * H + i), 0.0) << "position 4 is never read";
}

TEST(FiniteDifference, BiasGelu) {
  Rng rng(4);
  const int64_t T = 4, N = 7;
  Tensor x = random(rng, DType::f32, {T, N}, -3.0f, 3.0f), b = random(rng, DType::f32, {N}, -1.0f, 1.0f);
  Vec xv = values(x.view), bv = values(b.view);
  Tensor pre = make(DType::f32, {T, N});
  ref().bias_gelu_train(x.view, pre.view, b.view);
  Tensor dy = random(rng, DType::f32, {T, N});
  Tensor dx = make(DType::f32, {T, N}), dbias = make(DType::f32, {N});
  ref().bias_gelu_backward(dx.view, dbias.view, dy.view, pre.view);
  const Vec g = values(dy.view);
  auto loss = [&] {
    double L = 0.0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n)
        L += g[static_cast<size_t>(t * N + n)] * gelu64(xv[static_cast<size_t>(t * N + n)] + bv[static_cast<size_t>(n)]);
    return L;
  };
  expect_matches_fd("bias_gelu dx", values(dx.view), numeric_grad(&xv, loss));
  expect_matches_fd("bias_gelu dbias", values(dbias.view), numeric_grad(&bv, loss));
}

TEST(FiniteDifference, Rotary) {
  // L = sum(dy * rotary(x)) with the rotation written here in double (NeoX and GPT-J pairs,
  // partial: 4 of 6 columns per head, 2 heads of a 3-head row).
  for (bool interleaved : {false, true}) {
    Rng rng(7);
    const std::vector<int> lens = {3, 2};
    const int64_t T = 5, C = 18;
    Tensor x = random(rng, DType::f32, {T, C}), dy = random(rng, DType::f32, {T, C});
    Tensor freq = make(DType::f32, {2}), cu = cu_seqlens(lens);
    set(freq.view, 0, 1.0);
    set(freq.view, 1, 0.25);
    const Ops::Rotary rope{2, 6, interleaved, 1.0f};
    Tensor dx = copy_of(dy);
    ref().rotary_backward(dx.view, cu.view, freq.view, rope);
    Vec xv = values(x.view);
    const Vec g = values(dy.view);
    auto loss = [&] {
      Vec y = xv;
      for (int64_t t = 0; t < T; ++t) {
        const double p = t < 3 ? t : t - 3;
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t i = 0; i < 2; ++i) {
            const double angle = static_cast<float>(get(freq.view, i) * p);
            const int64_t a = t * C + h * 6 + (interleaved ? 2 * i : i);
            const int64_t b = t * C + h * 6 + (interleaved ? 2 * i + 1 : i + 2);
            const double va = xv[static_cast<size_t>(a)], vb = xv[static_cast<size_t>(b)];
            y[static_cast<size_t>(a)] = va * std::cos(angle) - vb * std::sin(angle);
            y[static_cast<size_t>(b)] = vb * std::cos(angle) + va * std::sin(angle);
          }
      }
      double L = 0.0;
      for (size_t i = 0; i < y.size(); ++i) L += g[i] * y[i];
      return L;
    };
    expect_matches_fd(interleaved ? "rotary dx (interleaved)" : "rotary dx", values(dx.view),
                      numeric_grad(&xv, loss));
  }
}

TEST(FiniteDifference, Glu) {
  // Both activations, both half orders: dx against central differences of
  // L = sum(dy * act(g) * u) written here in double.
  for (Ops::Glu::Act act : {Ops::Glu::Act::silu, Ops::Glu::Act::gelu_erf})
    for (bool second : {false, true}) {
      Rng rng(6);
      const int64_t T = 3, N = 5;
      Tensor x = random(rng, DType::f32, {T, 2 * N}, -4.0f, 4.0f), dy = random(rng, DType::f32, {T, N});
      Tensor dx = make(DType::f32, {T, 2 * N});
      ref().glu_backward(dx.view, dy.view, x.view, Ops::Glu{act, second});
      Vec xv = values(x.view);
      const Vec g = values(dy.view);
      auto loss = [&] {
        double L = 0.0;
        for (int64_t t = 0; t < T; ++t)
          for (int64_t n = 0; n < N; ++n) {
            const double gate = xv[static_cast<size_t>(t * 2 * N + (second ? N : 0) + n)];
            const double up = xv[static_cast<size_t>(t * 2 * N + (second ? 0 : N) + n)];
            const double a = act == Ops::Glu::Act::silu ? gate / (1.0 + std::exp(-gate)) : gelu64(gate);
            L += g[static_cast<size_t>(t * N + n)] * a * up;
          }
        return L;
      };
      expect_matches_fd(second ? "glu dx (act on second)" : "glu dx", values(dx.view), numeric_grad(&xv, loss));
    }
}

TEST(FiniteDifference, Tanh) {
  Rng rng(5);
  const int64_t R = 3, C = 8;
  Tensor u = random(rng, DType::f32, {R, C}, -1.5f, 1.5f), y = make(DType::f32, {R, C});
  Vec uv = values(u.view);
  for (int64_t i = 0; i < R * C; ++i) set(y.view, i, std::tanh(uv[static_cast<size_t>(i)]));
  Tensor dy = random(rng, DType::f32, {R, C}), dx = make(DType::f32, {R, C});
  ref().tanh_backward(dx.view, dy.view, y.view);
  const Vec g = values(dy.view);
  auto loss = [&] {
    double L = 0.0;
    for (size_t i = 0; i < uv.size(); ++i) L += g[i] * std::tanh(uv[i]);
    return L;
  };
  expect_matches_fd("tanh dx", values(dx.view), numeric_grad(&uv, loss));
}

TEST(FiniteDifference, Attention) {
  for (const auto& hd : std::vector<std::pair<int, int>>{{1, 8}, {2, 8}, {2, 5}}) {
    const int heads = hd.first, d = hd.second;  // (plain locals: the lambda captures them)
    Rng rng(6 + static_cast<uint64_t>(heads * 100 + d));
    const std::vector<int> lens = {3, 1, 4};
    const int64_t T = total(lens), C = 3 * heads * d, D = heads * d;
    Tensor qkv = random(rng, DType::f32, {T, C}, -1.5f, 1.5f), cu = cu_seqlens(lens);
    Tensor out = make(DType::f32, {T, D}), lse = make(DType::f32, {T, heads});
    ref().attention_train(out.view, lse.view, qkv.view, cu.view, heads, longest(lens), 0, {});
    Tensor dout = random(rng, DType::f32, {T, D}), dqkv = make(DType::f32, {T, C});
    ref().attention_backward(dqkv.view, dout.view, qkv.view, out.view, lse.view, cu.view, heads, longest(lens), 0, {});
    Vec xv = values(qkv.view);
    const Vec g = values(dout.view);
    auto loss = [&] { return dot(g, attention64(xv, lens, heads, d)); };
    expect_matches_fd("attention dqkv h" + std::to_string(heads) + " d" + std::to_string(d), values(dqkv.view),
                      numeric_grad(&xv, loss));
  }
}

// With dropout on the probabilities: the mask is fixed by (seed, step,
// tensor_id) and the flat index, so the loss is smooth in qkv and the central
// differences see the masked function. max_seqlen is passed larger than the
// longest sequence (it must not matter: the index's row stride is fixed), and
// a row offset is given. The reference forward is checked against the float64
// one too, closing the loop forward -> backward.
TEST(FiniteDifference, AttentionWithDropout) {
  for (const auto& hd : std::vector<std::pair<int, int>>{{1, 8}, {2, 5}}) {
    for (float p : {0.3f, 0.5f}) {
      const int heads = hd.first, d = hd.second;
      Rng rng(9 + static_cast<uint64_t>(heads * 100 + d));
      const std::vector<int> lens = {3, 1, 4, 2};
      const int max_seqlen = 5;
      const int64_t T = total(lens), C = 3 * heads * d, D = heads * d;
      const Ops::AttentionDropout drop{p, 0x0123456789abcdefull, 7, 3, 12345};
      const Vec mask = attention_mask64(drop, T, heads, max_seqlen);
      int kept = 0, dropped = 0;  // over the elements the kernels read (j < len)
      int64_t first = 0;
      for (int len : lens) {
        for (int64_t i = 0; i < len; ++i)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t j = 0; j < len; ++j)
              (mask[static_cast<size_t>(((first + i) * heads + h) * max_seqlen + j)] != 0.0 ? kept : dropped)++;
        first += len;
      }
      ASSERT_GT(kept, 0);
      ASSERT_GT(dropped, 0) << "the mask drops nothing: the check would not test dropout";
      Tensor qkv = random(rng, DType::f32, {T, C}, -1.5f, 1.5f), cu = cu_seqlens(lens);
      Tensor out = make(DType::f32, {T, D}), lse = make(DType::f32, {T, heads});
      ref().attention_train(out.view, lse.view, qkv.view, cu.view, heads, max_seqlen, 0, drop);
      Vec xv = values(qkv.view);
      const std::string what = "attention dropout h" + std::to_string(heads) + " d" + std::to_string(d) + " p" +
                               std::to_string(static_cast<int>(p * 100));
      const Vec want = attention64(xv, lens, heads, d, &mask, max_seqlen);
      const double out_err = relative_error(values(out.view), want);
      note("fd " + what + " out", out_err, 1e-6);
      EXPECT_LE(out_err, 1e-6) << what << ": reference forward against the float64 one";
      Tensor dout = random(rng, DType::f32, {T, D}), dqkv = make(DType::f32, {T, C});
      ref().attention_backward(dqkv.view, dout.view, qkv.view, out.view, lse.view, cu.view, heads, max_seqlen, 0, drop);
      const Vec g = values(dout.view);
      auto loss = [&] { return dot(g, attention64(xv, lens, heads, d, &mask, max_seqlen)); };
      expect_matches_fd(what + " dqkv", values(dqkv.view), numeric_grad(&xv, loss));
    }
  }
}

TEST(FiniteDifference, GatherRows) {
  Rng rng(7);
  const int64_t T = 6, H = 3;
  Tensor h = random(rng, DType::f32, {T, H});
  const std::vector<int32_t> rv = {4, 0, 4};  // a repeated row adds up
  Tensor rows = indices(rv), dout = random(rng, DType::f32, {3, H}), dh = make(DType::f32, {T, H});
  ref().gather_rows_backward(dh.view, dout.view, rows.view);
  Vec hv = values(h.view);
  const Vec g = values(dout.view);
  auto loss = [&] {
    double L = 0.0;
    for (size_t b = 0; b < rv.size(); ++b)
      for (int64_t i = 0; i < H; ++i) L += g[b * H + static_cast<size_t>(i)] * hv[static_cast<size_t>(rv[b] * H + i)];
    return L;
  };
  expect_matches_fd("gather_rows dh", values(dh.view), numeric_grad(&hv, loss));
}

TEST(FiniteDifference, Pool) {
  for (Pooling mode : {Pooling::cls, Pooling::mean, Pooling::max, Pooling::mean_sqrt_len,
                           Pooling::lasttoken}) {
    Rng rng(8);
    const std::vector<int> lens = {3, 0, 1, 4};
    const int64_t T = total(lens), H = 5, B = static_cast<int64_t>(lens.size());
    Tensor h = random(rng, DType::f32, {T, H}), cu = cu_seqlens(lens);
    Tensor dout = random(rng, DType::f32, {B, H}), dh = random(rng, DType::f32, {T, H});  // fully overwritten
    ref().pool_backward(dh.view, dout.view, h.view, cu.view, mode);
    Vec hv = values(h.view);
    const Vec g = values(dout.view);
    auto loss = [&] { return dot(g, pool64(hv, lens, H, mode)); };
    expect_matches_fd(std::string("pool dh ") + pname(mode), values(dh.view), numeric_grad(&hv, loss));
  }
}

// ---- 2. fast against reference -----------------------------------------------------------

constexpr double kUnitF32 = 0x1.0p-24;
double tolerance(DType act, int64_t reduction = 0) {
  if (act == DType::bf16) return 2e-2;
  if (act == DType::f16) return 2e-3;
  return std::max(1e-5, 16.0 * kUnitF32 * std::sqrt(static_cast<double>(reduction)));
}

struct Case {
  std::string name, family;
  double tol = 0.0;
  // Runs the op with the given kernels on inputs made from the case's seed; returns every output.
  std::function<std::vector<double>(const Kernels&)> run;
};
std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

uint64_t seed_of(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : name) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  return h;
}

void append(std::vector<double>& all, const TensorView& t) {
  const auto v = values(t);
  all.insert(all.end(), v.begin(), v.end());
}

const int64_t kTokens[] = {1, 3, 7, 64, 65};
const int64_t kHidden[] = {16, 48, 64};

void add_linear_cases(std::vector<Case>& cases) {
  struct Shape {
    int64_t M, N, K;
  };
  const Shape shapes[] = {{1, 1, 1},  {3, 16, 7},  {7, 48, 16}, {64, 64, 48},
                          {65, 16, 64}, {65, 192, 64}, {1, 7, 65}, {64, 3, 0}, {0, 5, 3}};
  size_t n = 0;
  for (Shape s : shapes)
    // (a, w, dy): dy f32 with bf16 a and w is the trainer's bf16 case (the fast
    // set rounds dy to bf16 for native bf16 GEMMs).
    for (const auto& types : std::vector<std::tuple<DType, DType, DType>>{
             {DType::f32, DType::f32, DType::f32},
             {DType::bf16, DType::f32, DType::bf16},
             {DType::bf16, DType::bf16, DType::bf16},
             {DType::bf16, DType::bf16, DType::f32}}) {
      // Named copies, not structured bindings: clang 14 (the sanitizer builds)
      // cannot capture a binding in a lambda.
      const DType at = std::get<0>(types), wt = std::get<1>(types), gt = std::get<2>(types);
      const int variant = static_cast<int>(n++ % 3);  // 0: everything; 1: no da; 2: no db
      Case c;
      c.name = std::string("linear_backward_") + dname(at) + "_w" + dname(wt) + "_dy" + dname(gt) + "_M" +
               std::to_string(s.M) + "_N" +
               std::to_string(s.N) + "_K" + std::to_string(s.K) + (variant == 1 ? "_noda" : variant == 2 ? "_nodb" : "");
      c.family = std::string("linear_backward ") + dname(at);
      c.tol = tolerance(at, std::max(s.M, s.N));
      const uint64_t seed = seed_of(c.name);
      c.run = [=](const Kernels& k) {
        Rng rng(seed);
        Tensor a = random(rng, at, {s.M, s.K}), w = random(rng, wt, {s.N, s.K}), dy = random(rng, gt, {s.M, s.N});
        Tensor da = make(at, {s.M, s.K});
        // Parameter gradients start from non-zero values: "+=" is part of the contract.
        Tensor dw = random(rng, DType::f32, {s.N, s.K}), db = random(rng, DType::f32, {s.N});
        k.linear_backward(variant == 1 ? TensorView{} : da.view, dw.view, variant == 2 ? TensorView{} : db.view,
                          dy.view, a.view, w.view, Accumulate::no);
        std::vector<double> all;
        if (variant != 1) append(all, da.view);
        append(all, dw.view);
        append(all, db.view);
        return all;
      };
      cases.push_back(std::move(c));
    }
}

void add_layernorm_cases(std::vector<Case>& cases) {
  size_t n = 0;
  for (int64_t T : kTokens)
    for (int64_t H : kHidden)
      for (DType at : {DType::f32, DType::bf16}) {
        const int variant = static_cast<int>(n++ % 3);  // 0: residual; 1: no residual; 2: dx aliases dy
        const std::string sizes = std::string("_") + dname(at) + "_T" + std::to_string(T) + "_H" + std::to_string(H);
        {
          Case c;
          c.name = "residual_layernorm_train" + sizes;
          c.family = std::string("residual_layernorm_train ") + dname(at);
          c.tol = tolerance(at);
          const uint64_t seed = seed_of(c.name);
          c.run = [=](const Kernels& k) {
            Rng rng(seed);
            Tensor x = random(rng, at, {T, H}, -2.0f, 3.0f), r = random(rng, at, {T, H});
            Tensor g = random(rng, DType::f32, {H}, 0.5f, 1.5f), b = random(rng, DType::f32, {H}, -0.5f, 0.5f);
            Tensor out = make(at, {T, H}), mean = make(DType::f32, {T}), rstd = make(DType::f32, {T});
            k.residual_layernorm_train(out.view, mean.view, rstd.view, x.view, r.view, g.view, b.view, 1e-5f);
            std::vector<double> all;
            append(all, out.view);
            append(all, mean.view);
            append(all, rstd.view);
            return all;
          };
          cases.push_back(std::move(c));
        }
        Case c;
        c.name = "layernorm_backward" + sizes + (variant == 1 ? "_nores" : variant == 2 ? "_dxisdy" : "");
        c.family = std::string("layernorm_backward ") + dname(at);
        c.tol = tolerance(at, T);
        const uint64_t seed = seed_of(c.name);
        c.run = [=](const Kernels& k) {
          Rng rng(seed);
          Tensor x = random(rng, at, {T, H}, -2.0f, 3.0f), r = random(rng, at, {T, H});
          Tensor g = random(rng, DType::f32, {H}, 0.5f, 1.5f), b = random(rng, DType::f32, {H}, -0.5f, 0.5f);
          Tensor out = make(at, {T, H}), mean = make(DType::f32, {T}), rstd = make(DType::f32, {T});
          const TensorView res = variant == 1 ? TensorView{} : r.view;
          Tensor zero = make(at, {T, H});
          // Statistics always from the reference, so both sets see the same inputs.
          ref().residual_layernorm_train(out.view, mean.view, rstd.view, x.view, variant == 1 ? zero.view : r.view,
                                         g.view, b.view, 1e-5f);
          Tensor dy = random(rng, at, {T, H}), dx = make(at, {T, H});
          Tensor dg = random(rng, DType::f32, {H}), dbt = random(rng, DType::f32, {H});
          const TensorView dxv = variant == 2 ? dy.view : dx.view;
          k.layernorm_backward(dxv, dg.view, dbt.view, dy.view, x.view, res, mean.view, rstd.view, g.view, Accumulate::no);
          std::vector<double> all;
          append(all, dxv);
          append(all, dg.view);
          append(all, dbt.view);
          return all;
        };
        cases.push_back(std::move(c));
      }
}

void add_embed_cases(std::vector<Case>& cases) {
  size_t n = 0;
  for (int64_t T : kTokens)
    for (int64_t H : kHidden) {
      const DType at = n % 2 ? DType::bf16 : DType::f32;
      const int variant = static_cast<int>(n++ % 3);  // 0: type ids; 1: type row 0; 2: no type table
      const std::string name = std::string("_") + dname(at) + "_T" + std::to_string(T) + "_H" + std::to_string(H) +
                               (variant == 0 ? "_typeids" : variant == 1 ? "_type0" : "_notype");
      for (bool train : {true, false}) {
        Case c;
        c.name = (train ? "embed_layernorm_train" : "embed_layernorm_backward") + name;
        c.family = std::string(train ? "embed_layernorm_train " : "embed_layernorm_backward ") + dname(at);
        c.tol = tolerance(at, T);
        const uint64_t seed = seed_of(c.name);
        c.run = [=](const Kernels& k) {
          Rng rng(seed);
          const int32_t V = 9, P = 70, TT = 2;  // few words: many tokens share a row
          Tensor word = random(rng, DType::f32, {V, H}), pos = random(rng, DType::f32, {P, H}, -0.3f, 0.3f),
                 type = random(rng, DType::f32, {TT, H}, -0.2f, 0.2f);
          Tensor g = random(rng, DType::f32, {H}, 0.5f, 1.5f), b = random(rng, DType::f32, {H}, -0.5f, 0.5f);
          Tensor ids = indices(random_ids(rng, T, V)), ps = indices(random_ids(rng, T, P)),
                 ty = indices(random_ids(rng, T, TT));
          const TensorView tyv = variant == 0 ? ty.view : TensorView{};
          const TensorView typ = variant == 2 ? TensorView{} : type.view;
          Tensor out = make(at, {T, H}), mean = make(DType::f32, {T}), rstd = make(DType::f32, {T});
          std::vector<double> all;
          if (train) {
            k.embed_layernorm_train(out.view, mean.view, rstd.view, ids.view, ps.view, tyv, word.view, pos.view, typ,
                                    g.view, b.view, 1e-5f);
            append(all, out.view);
            append(all, mean.view);
            append(all, rstd.view);
            return all;
          }
          ref().embed_layernorm_train(out.view, mean.view, rstd.view, ids.view, ps.view, tyv, word.view, pos.view,
                                      typ, g.view, b.view, 1e-5f);
          Tensor dy = random(rng, at, {T, H});
          Tensor dword = random(rng, DType::f32, {V, H}), dpos = random(rng, DType::f32, {P, H}),
                 dtype = random(rng, DType::f32, {TT, H}), dg = random(rng, DType::f32, {H}),
                 dbt = random(rng, DType::f32, {H});
          k.embed_layernorm_backward(dword.view, dpos.view, variant == 2 ? TensorView{} : dtype.view, dg.view,
                                     dbt.view, dy.view, ids.view, ps.view, tyv, word.view, pos.view, typ, mean.view,
                                     rstd.view, g.view);
          append(all, dword.view);
          append(all, dpos.view);
          append(all, dtype.view);
          append(all, dg.view);
          append(all, dbt.view);
          return all;
        };
        cases.push_back(std::move(c));
      }
    }
}

void add_activation_cases(std::vector<Case>& cases) {
  size_t n = 0;
  for (int64_t T : kTokens)
    for (int64_t N : {int64_t{16}, int64_t{48}, int64_t{64}, int64_t{192}})
      for (DType at : {DType::f32, DType::bf16}) {
        const int variant = static_cast<int>(n++ % 3);  // 0: separate; 1: dx aliases dy; 2: no bias
        const std::string sizes = std::string("_") + dname(at) + "_T" + std::to_string(T) + "_N" + std::to_string(N) +
                                  (variant == 1 ? "_alias" : variant == 2 ? "_nobias" : "");
        {
          Case c;
          c.name = "bias_gelu_train" + sizes;
          c.family = std::string("bias_gelu_train ") + dname(at);
          c.tol = tolerance(at);
          const uint64_t seed = seed_of(c.name);
          c.run = [=](const Kernels& k) {
            Rng rng(seed);
            Tensor x = random(rng, at, {T, N}, -6.0f, 6.0f), b = random(rng, DType::f32, {N});
            Tensor pre = make(variant == 1 ? DType::f32 : at, {T, N});
            k.bias_gelu_train(x.view, pre.view, variant == 2 ? TensorView{} : b.view);
            std::vector<double> all;
            append(all, x.view);
            append(all, pre.view);
            return all;
          };
          cases.push_back(std::move(c));
        }
        {
          Case c;
          c.name = "bias_gelu_backward" + sizes;
          c.family = std::string("bias_gelu_backward ") + dname(at);
          c.tol = tolerance(at, T);
          const uint64_t seed = seed_of(c.name);
          c.run = [=](const Kernels& k) {
            Rng rng(seed);
            Tensor pre = random(rng, at, {T, N}, -6.0f, 6.0f), dy = random(rng, at, {T, N});
            Tensor dx = make(at, {T, N}), db = random(rng, DType::f32, {N});
            const TensorView dxv = variant == 1 ? dy.view : dx.view;
            k.bias_gelu_backward(dxv, variant == 2 ? TensorView{} : db.view, dy.view, pre.view);
            std::vector<double> all;
            append(all, dxv);
            append(all, db.view);
            return all;
          };
          cases.push_back(std::move(c));
        }
        {
          Case c;
          c.name = "tanh_backward" + sizes;
          c.family = std::string("tanh_backward ") + dname(at);
          c.tol = tolerance(at);
          const uint64_t seed = seed_of(c.name);
          c.run = [=](const Kernels& k) {
            Rng rng(seed);
            Tensor y = random(rng, at, {T, N}), dy = random(rng, at, {T, N}), dx = make(at, {T, N});
            const TensorView dxv = variant == 1 ? dy.view : dx.view;
            k.tanh_backward(dxv, dy.view, y.view);
            return values(dxv);
          };
          cases.push_back(std::move(c));
        }
      }
}

// Each shape without dropout, then with attention dropout p = 0.1 and 0.5
// (both sets draw the same mask, so only rounding differs; odd longest
// lengths start rows inside Philox blocks). One long sequence (1100 keys)
// makes the fast kernels draw a row's mask in more than one Philox tile.
void add_attention_case(std::vector<Case>& cases, const std::vector<int>& lens, int heads, int d, DType at, float p,
                        uint32_t step) {
  const std::string name = std::string("_") + dname(at) + "_" + lens_name(lens) + "_h" + std::to_string(heads) +
                           "_d" + std::to_string(d) +
                           (p > 0.0f ? "_p" + std::to_string(static_cast<int>(p * 100)) : "");
  // Both also with the fast kernels' 8-float vectors (as on a CPU without
  // AVX-512; 0 = the CPU's own width).
  for (const auto& variant : {std::pair{true, 0}, std::pair{true, 8}, std::pair{false, 0}, std::pair{false, 8}}) {
    const bool train = variant.first;  // copies: clang 14 cannot capture a structured binding
    const int floats = variant.second;
    Case c;
    c.name = (train ? "attention_train" : "attention_backward") + name + (floats ? "_v" + std::to_string(floats) : "");
    c.family =
        std::string(train ? "attention_train " : "attention_backward ") + dname(at) + (p > 0.0f ? " dropout" : "");
    c.tol = tolerance(at, longest(lens));
    const uint64_t seed = seed_of(c.name);
    const Ops::AttentionDropout drop{p, seed_of(name), step, 4};
    c.run = [=](const Kernels& k) {
      Rng rng(seed);
      const int64_t T = total(lens), C = 3 * heads * d, D = heads * d;
      Tensor qkv = random(rng, at, {T, C}, -2.5f, 2.5f), cu = cu_seqlens(lens);
      Tensor out = make(at, {T, D}), lse = make(DType::f32, {T, heads});
      std::vector<double> all;
      struct Width {  // put back however the case ends
        explicit Width(int floats) { cpu::fast::set_attention_vector_floats_for_testing(floats); }
        ~Width() { cpu::fast::set_attention_vector_floats_for_testing(0); }
      } width(floats);
      if (train) {
        k.attention_train(out.view, lse.view, qkv.view, cu.view, heads, longest(lens), 0, drop);
        append(all, out.view);
        append(all, lse.view);
        return all;
      }
      ref().attention_train(out.view, lse.view, qkv.view, cu.view, heads, longest(lens), 0, drop);
      Tensor dout = random(rng, at, {T, D}), dqkv = random(rng, at, {T, C});  // fully overwritten
      k.attention_backward(dqkv.view, dout.view, qkv.view, out.view, lse.view, cu.view, heads, longest(lens), 0, drop);
      append(all, dqkv.view);
      return all;
    };
    cases.push_back(std::move(c));
  }
}

void add_attention_cases(std::vector<Case>& cases) {
  const std::vector<std::vector<int>> batches = {{1}, {3}, {1, 2, 4}, {1, 30, 33}, {64, 1}, {0, 5, 0}};
  const std::vector<std::pair<int, int>> head_dims = {{1, 8}, {2, 16}, {4, 24}, {2, 8}, {4, 16}, {1, 24}};
  size_t n = 0;
  for (const auto& lens : batches)
    for (const auto& hd : head_dims) {
      const DType at = n++ % 4 == 3 ? DType::bf16 : DType::f32;
      for (float p : {0.0f, 0.1f, 0.5f})
        add_attention_case(cases, lens, hd.first, hd.second, at, p, static_cast<uint32_t>(n));
    }
  add_attention_case(cases, {3, 1100}, 1, 8, DType::f32, 0.1f, 1);
}

void add_movement_cases(std::vector<Case>& cases) {
  for (int64_t T : kTokens)
    for (int64_t H : kHidden) {
      {
        Case c;
        c.name = "gather_rows_backward_T" + std::to_string(T) + "_H" + std::to_string(H);
        c.family = "gather_rows_backward f32";
        c.tol = 0.0;  // one f32 addition per element, in the same order: exact
        const uint64_t seed = seed_of(c.name);
        c.run = [=](const Kernels& k) {
          Rng rng(seed);
          const int64_t B = 5;
          Tensor dh = random(rng, DType::f32, {T, H}), dout = random(rng, DType::f32, {B, H});
          Tensor rows = indices(random_ids(rng, B, static_cast<int32_t>(T)));
          k.gather_rows_backward(dh.view, dout.view, rows.view);
          return values(dh.view);
        };
        cases.push_back(std::move(c));
      }
      for (Pooling mode : {Pooling::cls, Pooling::mean, Pooling::max, Pooling::mean_sqrt_len,
                               Pooling::lasttoken}) {
        Case c;
        c.name = std::string("pool_backward_") + pname(mode) + "_T" + std::to_string(T) + "_H" + std::to_string(H);
        c.family = "pool_backward f32";
        c.tol = tolerance(DType::f32);
        const uint64_t seed = seed_of(c.name);
        c.run = [=](const Kernels& k) {
          Rng rng(seed);
          // Uneven lengths with a 1 and a 0, summing to T.
          std::vector<int> lens;
          int left = static_cast<int>(T);
          for (int len : {1, 0, 5, 17}) {
            const int take = std::min(len, left);
            lens.push_back(take);
            left -= take;
          }
          if (left > 0) lens.push_back(left);
          Tensor h = random(rng, DType::f32, {T, H}), cu = cu_seqlens(lens);
          Tensor dout = random(rng, DType::f32, {static_cast<int64_t>(lens.size()), H});
          Tensor dh = random(rng, DType::f32, {T, H});
          k.pool_backward(dh.view, dout.view, h.view, cu.view, mode);
          return values(dh.view);
        };
        cases.push_back(std::move(c));
      }
    }
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  add_linear_cases(cases);
  add_layernorm_cases(cases);
  add_embed_cases(cases);
  add_activation_cases(cases);
  add_attention_cases(cases);
  add_movement_cases(cases);
  return cases;
}

class FastVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(FastVsReference, Matches) {
  const Case& c = GetParam();
  const std::vector<double> want = c.run(ref());
  const std::vector<double> got = c.run(fast());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_TRUE(std::isfinite(want[i])) << "reference element " << i;
  if (c.tol == 0.0) {
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
    return;
  }
  const double err = relative_error(got, want);
  note("fast vs ref " + c.family, err, c.tol);
  EXPECT_LE(err, c.tol) << "relative error of fast against reference";
}

INSTANTIATE_TEST_SUITE_P(Table, FastVsReference, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// ---- 3. semantics --------------------------------------------------------------------------

class Semantics : public ::testing::TestWithParam<const Kernels*> {
 protected:
  const Kernels& k() const { return *GetParam(); }
};

// Parameter gradients accumulate: two calls into zeroed buffers give exactly
// twice one call (x + x = 2x is exact in binary floating point, and the
// second call adds the same sum again).
TEST_P(Semantics, ParameterGradientsAccumulate) {
  Rng rng(21);
  const int64_t M = 65, N = 48, K = 16, V = 9, P = 70;
  Tensor a = random(rng, DType::f32, {M, K}), w = random(rng, DType::f32, {N, K}), dy = random(rng, DType::f32, {M, N});
  Tensor dw1 = make(DType::f32, {N, K}), db1 = make(DType::f32, {N});
  Tensor dw2 = make(DType::f32, {N, K}), db2 = make(DType::f32, {N});
  k().linear_backward(TensorView{}, dw1.view, db1.view, dy.view, a.view, w.view, Accumulate::no);
  for (int i = 0; i < 2; ++i) k().linear_backward(TensorView{}, dw2.view, db2.view, dy.view, a.view, w.view, Accumulate::no);
  for (const auto& [one, two] : {std::pair{&dw1, &dw2}, std::pair{&db1, &db2}}) {
    const auto v1 = values(one->view), v2 = values(two->view);
    for (size_t i = 0; i < v1.size(); ++i) ASSERT_EQ(v2[i], 2 * v1[i]) << k().name << " linear element " << i;
  }
  // LayerNorm, GELU bias and embedding tables alike.
  Tensor x = random(rng, DType::f32, {M, N}), g = random(rng, DType::f32, {N}, 0.5f, 1.5f),
         b = random(rng, DType::f32, {N});
  Tensor out = make(DType::f32, {M, N}), mean = make(DType::f32, {M}), rstd = make(DType::f32, {M});
  Tensor ids = indices(random_ids(rng, M, V)), ps = indices(random_ids(rng, M, P));
  Tensor word = random(rng, DType::f32, {V, N}), pos = random(rng, DType::f32, {P, N});
  ref().embed_layernorm_train(out.view, mean.view, rstd.view, ids.view, ps.view, TensorView{}, word.view, pos.view,
                              TensorView{}, g.view, b.view, 1e-5f);
  std::vector<Tensor> once, twice;
  for (int calls : {1, 2}) {
    Tensor dword = make(DType::f32, {V, N}), dpos = make(DType::f32, {P, N}), dg = make(DType::f32, {N}),
           dbt = make(DType::f32, {N}), dbias = make(DType::f32, {N}), dx = make(DType::f32, {M, N});
    for (int i = 0; i < calls; ++i) {
      k().embed_layernorm_backward(dword.view, dpos.view, TensorView{}, dg.view, dbt.view, dy.view, ids.view,
                                   ps.view, TensorView{}, word.view, pos.view, TensorView{}, mean.view, rstd.view,
                                   g.view);
      k().bias_gelu_backward(dx.view, dbias.view, dy.view, x.view);
    }
    auto& dst = calls == 1 ? once : twice;
    for (Tensor* t : {&dword, &dpos, &dg, &dbt, &dbias}) dst.push_back(copy_of(*t));
  }
  for (size_t t = 0; t < once.size(); ++t) {
    const auto v1 = values(once[t].view), v2 = values(twice[t].view);
    for (size_t i = 0; i < v1.size(); ++i) ASSERT_EQ(v2[i], 2 * v1[i]) << k().name << " gradient " << t << " element " << i;
  }
  // gather_rows_backward adds into dh as well (distinct rows here: each element gets one addition per call).
  Tensor dh = make(DType::f32, {M, N}), rows = indices({3, 0});
  Tensor go = random(rng, DType::f32, {2, N});
  k().gather_rows_backward(dh.view, go.view, rows.view);
  k().gather_rows_backward(dh.view, go.view, rows.view);
  for (int64_t i = 0; i < N; ++i) {
    EXPECT_EQ(get(dh.view, 3 * N + i), 2 * get(go.view, i)) << k().name;
    EXPECT_EQ(get(dh.view, i), 2 * get(go.view, N + i)) << k().name;
    EXPECT_EQ(get(dh.view, N + i), 0.0) << k().name;
  }
}

// The training forwards are the inference forwards plus saved statistics:
// the outputs are the same bits.
TEST_P(Semantics, TrainingForwardsEqualInferenceForwards) {
  for (DType at : {DType::f32, DType::bf16}) {
    Rng rng(22);
    const std::vector<int> lens = {1, 30, 34};
    const int64_t T = total(lens), H = 48, heads = 2, d = 24, V = 9, P = 70;
    Tensor x = random(rng, at, {T, H}, -2.0f, 3.0f), r = random(rng, at, {T, H});
    Tensor g = random(rng, DType::f32, {H}, 0.5f, 1.5f), b = random(rng, DType::f32, {H});
    Tensor o1 = make(at, {T, H}), o2 = make(at, {T, H}), mean = make(DType::f32, {T}), rstd = make(DType::f32, {T});
    k().residual_layernorm(o1.view, x.view, r.view, g.view, b.view, 1e-12f, TensorView{});
    k().residual_layernorm_train(o2.view, mean.view, rstd.view, x.view, r.view, g.view, b.view, 1e-12f);
    EXPECT_EQ(values(o1.view), values(o2.view)) << k().name << " residual_layernorm " << dname(at);
    Tensor ids = indices(random_ids(rng, T, V)), ps = indices(random_ids(rng, T, P)), ty = indices(random_ids(rng, T, 2));
    Tensor word = random(rng, at, {V, H}), pos = random(rng, at, {P, H}), type = random(rng, at, {2, H});
    k().embed_layernorm(o1.view, ids.view, ps.view, ty.view, word.view, pos.view, type.view, g.view, b.view, 1e-12f,
                        TensorView{});
    k().embed_layernorm_train(o2.view, mean.view, rstd.view, ids.view, ps.view, ty.view, word.view, pos.view,
                              type.view, g.view, b.view, 1e-12f);
    EXPECT_EQ(values(o1.view), values(o2.view)) << k().name << " embed_layernorm " << dname(at);
    Tensor u1 = random(rng, at, {T, H}, -6.0f, 6.0f), u2 = copy_of(u1), pre = make(at, {T, H});
    k().bias_gelu(u1.view, b.view);
    k().bias_gelu_train(u2.view, pre.view, b.view);
    EXPECT_EQ(values(u1.view), values(u2.view)) << k().name << " bias_gelu " << dname(at);
    Tensor qkv = random(rng, at, {T, 3 * heads * d}, -2.5f, 2.5f), cu = cu_seqlens(lens);
    Tensor a1 = make(at, {T, heads * d}), a2 = make(at, {T, heads * d}), lse = make(DType::f32, {T, heads});
    k().attention(a1.view, qkv.view, cu.view, heads, longest(lens), 0);
    k().attention_train(a2.view, lse.view, qkv.view, cu.view, heads, longest(lens), 0, {});
    EXPECT_EQ(values(a1.view), values(a2.view)) << k().name << " attention " << dname(at);
    // A one-token sequence attends only to itself: lse = q·k / sqrt(d).
    double s = 0.0;
    for (int64_t c = 0; c < d; ++c) s += get(qkv.view, c) * get(qkv.view, heads * d + c);
    EXPECT_NEAR(get(lse.view, 0), s / std::sqrt(static_cast<double>(d)), 1e-5 * std::max(1.0, std::fabs(s)))
        << k().name;
  }
}

// The attention-probability mask is the dropout op's mask at the flat index
// ((row_offset + t) * heads + h) * 2^32 + j. With q = 0 every score is 0, so
// P_ij = 1/len, and with v_j the one-hot vector e_j, out[t, h, j] = m_tj / len:
// the output shows each row's mask factors. They must be kept/dropped exactly
// where the dropout op (the same kernel set's) keeps/drops ones at those
// indices — a [2, 4] tensor of ones at row_offset index / 4 covers keys 0..7
// — and equal its factor / len. With and without a row offset.
TEST_P(Semantics, AttentionDropoutMaskIsTheDropoutOpsMask) {
  const std::vector<int> lens = {5, 1, 7, 3, 6};
  const int heads = 2, d = 8, max_seqlen = 7;
  const int64_t T = total(lens), C = 3 * heads * d, D = heads * d;
  for (float p : {0.1f, 0.5f})
    for (uint64_t row_offset : {uint64_t{0}, uint64_t{1000003}}) {
      const Ops::AttentionDropout drop{p, 0xfeedfacecafebeefull, 11, 5, row_offset};
      Rng rng(25);
      Tensor qkv = random(rng, DType::f32, {T, C}), cu = cu_seqlens(lens);  // k random; q and v set below
      int64_t first = 0;
      for (int len : lens) {
        for (int64_t j = 0; j < len; ++j)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t c = 0; c < d; ++c) {
              set(qkv.view, (first + j) * C + h * d + c, 0.0);
              set(qkv.view, (first + j) * C + 2 * D + h * d + c, c == j ? 1.0 : 0.0);
            }
        first += len;
      }
      Tensor out = make(DType::f32, {T, D}), lse = make(DType::f32, {T, heads});
      k().attention_train(out.view, lse.view, qkv.view, cu.view, heads, max_seqlen, 0, drop);
      Tensor ones = make(DType::f32, {2, 4}), factors = make(DType::f32, {2, 4});
      for (int64_t i = 0; i < 8; ++i) set(ones.view, i, 1.0);
      int kept = 0, dropped = 0;
      first = 0;
      for (int len : lens) {
        for (int64_t i = 0; i < len; ++i)
          for (int64_t h = 0; h < heads; ++h) {
            const int64_t t = first + i;
            k().dropout(factors.view, ones.view, p, drop.seed, drop.step, drop.tensor_id, drop.row_index(t, h, heads) / 4);
            for (int64_t j = 0; j < len; ++j) {
              const double f = get(factors.view, j);
              const double o = get(out.view, t * D + h * d + j);
              ASSERT_EQ(o != 0.0, f != 0.0) << k().name << " p " << p << " row " << t << " head " << h << " key " << j;
              EXPECT_NEAR(o * len, f, 1e-6 * f)
                  << k().name << " p " << p << " row " << t << " head " << h << " key " << j;
              (f != 0.0 ? kept : dropped)++;
            }
          }
        first += len;
      }
      EXPECT_GT(kept, 0);
      EXPECT_GT(dropped, 0);
    }
}

// A batch split in two at a sequence boundary, each part run with the tokens
// before it as row_offset (and its own, smaller max_seqlen), gives the whole
// batch's out, lse and dqkv bit for bit: a query's masks depend on its own
// row and keys only (what data-parallel ranks rely on).
TEST_P(Semantics, AttentionDropoutOfTwoPartsIsTheWholeBatchs) {
  const std::vector<int> lens = {5, 9, 2, 3, 6};
  const int heads = 2, d = 8;
  const int64_t T = total(lens), C = 3 * heads * d, D = heads * d;
  const Ops::AttentionDropout drop{0.3f, 0xabcdef, 3, 7};
  Rng rng(31);
  Tensor qkv = random(rng, DType::f32, {T, C}, -2.0, 2.0), dout = random(rng, DType::f32, {T, D});
  Tensor out = make(DType::f32, {T, D}), lse = make(DType::f32, {T, heads}), dqkv = make(DType::f32, {T, C});
  k().attention_train(out.view, lse.view, qkv.view, cu_seqlens(lens).view, heads, longest(lens), 0, drop);
  k().attention_backward(dqkv.view, dout.view, qkv.view, out.view, lse.view, cu_seqlens(lens).view, heads,
                         longest(lens), 0, drop);
  const std::vector<int> first_part(lens.begin(), lens.begin() + 2), second_part(lens.begin() + 2, lens.end());
  int64_t row = 0;
  for (const std::vector<int>& part : {first_part, second_part}) {
    const int64_t n = total(part);
    auto rows = [&](const Tensor& t, int64_t width) {  // rows [row, row + n) of t as a tensor of their own
      Tensor r = make(t.view.dtype, {n, width});
      std::memcpy(r.view.data, static_cast<const float*>(t.view.data) + row * width, static_cast<size_t>(n * width) * 4);
      return r;
    };
    Ops::AttentionDropout part_drop = drop;
    part_drop.row_offset = static_cast<uint64_t>(row);
    Tensor pqkv = rows(qkv, C), pdout = rows(dout, D), cu = cu_seqlens(part);
    Tensor pout = make(DType::f32, {n, D}), plse = make(DType::f32, {n, heads}), pdqkv = make(DType::f32, {n, C});
    k().attention_train(pout.view, plse.view, pqkv.view, cu.view, heads, longest(part), 0, part_drop);
    k().attention_backward(pdqkv.view, pdout.view, pqkv.view, pout.view, plse.view, cu.view, heads, longest(part), 0,
                           part_drop);
    EXPECT_EQ(values(pout.view), values(rows(out, D).view)) << k().name << " out, part at row " << row;
    EXPECT_EQ(values(plse.view), values(rows(lse, heads).view)) << k().name << " lse, part at row " << row;
    EXPECT_EQ(values(pdqkv.view), values(rows(dqkv, C).view)) << k().name << " dqkv, part at row " << row;
    row += n;
  }
}

// p = 0 is no dropout at all: any key gives the bits of the default call.
// p = 1 drops everything: out and the gradients are zeros (no NaN), lse is
// the undropped one. p outside [0, 1] is refused.
TEST_P(Semantics, AttentionDropoutEdges) {
  for (DType at : {DType::f32, DType::bf16}) {
    Rng rng(26);
    const std::vector<int> lens = {1, 30, 34};
    const int heads = 2, d = 24;
    const int64_t T = total(lens), C = 3 * heads * d, D = heads * d;
    Tensor qkv = random(rng, at, {T, C}, -2.5f, 2.5f), cu = cu_seqlens(lens), dout = random(rng, at, {T, D});
    Tensor out0 = make(at, {T, D}), lse0 = make(DType::f32, {T, heads}), dqkv0 = make(at, {T, C});
    k().attention_train(out0.view, lse0.view, qkv.view, cu.view, heads, longest(lens), 0, {});
    k().attention_backward(dqkv0.view, dout.view, qkv.view, out0.view, lse0.view, cu.view, heads, longest(lens), 0, {});
    const Ops::AttentionDropout zero{0.0f, 0x1234, 9, 2};
    Tensor out = make(at, {T, D}), lse = make(DType::f32, {T, heads}), dqkv = make(at, {T, C});
    k().attention_train(out.view, lse.view, qkv.view, cu.view, heads, longest(lens), 0, zero);
    k().attention_backward(dqkv.view, dout.view, qkv.view, out.view, lse.view, cu.view, heads, longest(lens), 0, zero);
    EXPECT_EQ(values(out.view), values(out0.view)) << k().name << " p = 0 out " << dname(at);
    EXPECT_EQ(values(lse.view), values(lse0.view)) << k().name << " p = 0 lse " << dname(at);
    EXPECT_EQ(values(dqkv.view), values(dqkv0.view)) << k().name << " p = 0 dqkv " << dname(at);

    const Ops::AttentionDropout all{1.0f, 0x1234, 9, 2};
    Tensor out1 = random(rng, at, {T, D}), lse1 = make(DType::f32, {T, heads}), dqkv1 = random(rng, at, {T, C});
    k().attention_train(out1.view, lse1.view, qkv.view, cu.view, heads, longest(lens), 0, all);
    k().attention_backward(dqkv1.view, dout.view, qkv.view, out1.view, lse1.view, cu.view, heads, longest(lens), 0, all);
    for (double v : values(out1.view)) ASSERT_EQ(v, 0.0) << k().name << " p = 1 out " << dname(at);
    for (double v : values(dqkv1.view)) ASSERT_EQ(v, 0.0) << k().name << " p = 1 dqkv " << dname(at);
    EXPECT_EQ(values(lse1.view), values(lse0.view)) << k().name << " p = 1 lse " << dname(at);

    for (float bad : {-0.1f, 1.5f, NAN}) {
      const Ops::AttentionDropout b{bad, 1, 0, 0};
      EXPECT_THROW(k().attention_train(out.view, lse.view, qkv.view, cu.view, heads, longest(lens), 0, b), Error)
          << k().name << " p " << bad;
      EXPECT_THROW(k().attention_backward(dqkv.view, dout.view, qkv.view, out.view, lse.view, cu.view, heads,
                                          longest(lens), 0, b),
                   Error)
          << k().name << " p " << bad;
    }
  }
}

// Reductions over tokens and scatter-adds: the same inputs give the same bits
// (fixed-order sums, no atomics), on sizes large enough to run threaded.
TEST_P(Semantics, BackwardIsBitwiseReproducible) {
  Rng rng(23);
  const int64_t T = 2048, H = 64, V = 50, P = 128;
  Tensor word = random(rng, DType::f32, {V, H}), pos = random(rng, DType::f32, {P, H});
  Tensor g = random(rng, DType::f32, {H}, 0.5f, 1.5f), b = random(rng, DType::f32, {H});
  Tensor ids = indices(random_ids(rng, T, V)), ps = indices(random_ids(rng, T, P));
  Tensor out = make(DType::f32, {T, H}), mean = make(DType::f32, {T}), rstd = make(DType::f32, {T});
  k().embed_layernorm_train(out.view, mean.view, rstd.view, ids.view, ps.view, TensorView{}, word.view, pos.view,
                            TensorView{}, g.view, b.view, 1e-5f);
  Tensor dy = random(rng, DType::f32, {T, H}), a = random(rng, DType::f32, {T, H}), w = random(rng, DType::f32, {H, H});
  std::vector<std::vector<double>> runs;
  for (int run = 0; run < 3; ++run) {
    Tensor dword = make(DType::f32, {V, H}), dpos = make(DType::f32, {P, H}), dg = make(DType::f32, {H}),
           dbt = make(DType::f32, {H}), dx = make(DType::f32, {T, H}), dw = make(DType::f32, {H, H}),
           db = make(DType::f32, {H}), dbias = make(DType::f32, {H}), da = make(DType::f32, {T, H});
    k().embed_layernorm_backward(dword.view, dpos.view, TensorView{}, dg.view, dbt.view, dy.view, ids.view, ps.view,
                                 TensorView{}, word.view, pos.view, TensorView{}, mean.view, rstd.view, g.view);
    k().layernorm_backward(dx.view, dg.view, dbt.view, dy.view, a.view, TensorView{}, mean.view, rstd.view, g.view,
                           Accumulate::no);
    k().linear_backward(da.view, dw.view, db.view, dy.view, a.view, w.view, Accumulate::no);
    k().bias_gelu_backward(dx.view, dbias.view, dy.view, a.view);
    std::vector<double> all;
    for (Tensor* t : {&dword, &dpos, &dg, &dbt, &dx, &dw, &db, &dbias, &da}) append(all, t->view);
    runs.push_back(std::move(all));
  }
  for (size_t r = 1; r < runs.size(); ++r)
    for (size_t i = 0; i < runs[0].size(); ++i) ASSERT_EQ(runs[r][i], runs[0][i]) << k().name << " run " << r << " element " << i;
}

// The CPU's own token reductions (column sums, dgamma/dbeta, the embedding
// scatter-adds) use fixed blocks and groups, so the thread count cannot change
// a bit. (The GEMMs of linear_backward are oneDNN's and are left out.) The
// OpenMP runtime comes with stoke_cpu; its C entry points are declared here
// rather than making the tests depend on OpenMP's header.
extern "C" void omp_set_num_threads(int);
extern "C" int omp_get_max_threads(void);

TEST(Determinism, TokenReductionsDoNotDependOnThreadCount) {
  Rng rng(24);
  const int64_t T = 2048, H = 64, V = 50, P = 128;  // T * H above the kernels' threading threshold
  Tensor word = random(rng, DType::f32, {V, H}), pos = random(rng, DType::f32, {P, H}), type = random(rng, DType::f32, {2, H});
  Tensor g = random(rng, DType::f32, {H}, 0.5f, 1.5f), b = random(rng, DType::f32, {H});
  Tensor ids = indices(random_ids(rng, T, V)), ps = indices(random_ids(rng, T, P)), ty = indices(random_ids(rng, T, 2));
  Tensor out = make(DType::f32, {T, H}), mean = make(DType::f32, {T}), rstd = make(DType::f32, {T});
  ref().embed_layernorm_train(out.view, mean.view, rstd.view, ids.view, ps.view, ty.view, word.view, pos.view,
                              type.view, g.view, b.view, 1e-5f);
  Tensor dy = random(rng, DType::f32, {T, H}), x = random(rng, DType::f32, {T, H}), w = random(rng, DType::f32, {H, H});
  const int threads_before = omp_get_max_threads();
  std::vector<std::vector<double>> runs;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    Tensor dword = make(DType::f32, {V, H}), dpos = make(DType::f32, {P, H}), dtype = make(DType::f32, {2, H}),
           dg = make(DType::f32, {H}), dbt = make(DType::f32, {H}), dx = make(DType::f32, {T, H}),
           dbias = make(DType::f32, {H}), db = make(DType::f32, {H});
    fast().embed_layernorm_backward(dword.view, dpos.view, dtype.view, dg.view, dbt.view, dy.view, ids.view, ps.view,
                                    ty.view, word.view, pos.view, type.view, mean.view, rstd.view, g.view);
    fast().layernorm_backward(dx.view, dg.view, dbt.view, dy.view, x.view, TensorView{}, mean.view, rstd.view, g.view,
                              Accumulate::no);
    fast().bias_gelu_backward(dx.view, dbias.view, dy.view, x.view);
    fast().linear_backward(TensorView{}, TensorView{}, db.view, dy.view, x.view, w.view, Accumulate::no);  // db only
    std::vector<double> all;
    for (Tensor* t : {&dword, &dpos, &dtype, &dg, &dbt, &dx, &dbias, &db}) append(all, t->view);
    runs.push_back(std::move(all));
  }
  omp_set_num_threads(threads_before);
  for (size_t r = 1; r < runs.size(); ++r)
    for (size_t i = 0; i < runs[0].size(); ++i)
      ASSERT_EQ(runs[r][i], runs[0][i]) << "threads " << r + 1 << " element " << i;
}

TEST_P(Semantics, RefusesBadCalls) {
  Tensor a = make(DType::f32, {2, 3}), w = make(DType::f32, {4, 3}), dy = make(DType::f32, {2, 4});
  Tensor dw = make(DType::f32, {4, 3}), dwb = make(DType::bf16, {4, 3}), db = make(DType::f32, {5});
  EXPECT_NO_THROW(k().linear_backward(TensorView{}, dw.view, TensorView{}, dy.view, a.view, w.view, Accumulate::no));
  EXPECT_THROW(k().linear_backward(TensorView{}, dwb.view, TensorView{}, dy.view, a.view, w.view, Accumulate::no), Error);  // bf16 dw
  EXPECT_THROW(k().linear_backward(TensorView{}, dw.view, db.view, dy.view, a.view, w.view, Accumulate::no), Error);  // db [5], N = 4
  Tensor qkv = make(DType::f32, {3, 12}), out = make(DType::f32, {3, 4}), lse = make(DType::f32, {3, 2});
  Tensor dqkv = make(DType::f32, {3, 12}), cu = cu_seqlens({3});
  EXPECT_THROW(k().attention_train(out.view, lse.view, qkv.view, cu.view, 1, 3, 0, {}), Error);  // lse [3, 2], heads 1
  EXPECT_THROW(k().attention_backward(dqkv.view, out.view, qkv.view, out.view, lse.view, cu.view, 1, 3, 0, {}), Error);
  Tensor h = make(DType::f32, {3, 4}), dh = make(DType::f32, {3, 4}), pout = make(DType::f32, {1, 4});
  EXPECT_THROW(k().pool_backward(dh.view, pout.view, TensorView{}, cu.view, Pooling::max), Error);  // max needs h
  EXPECT_NO_THROW(k().pool_backward(dh.view, pout.view, TensorView{}, cu.view, Pooling::mean));
  Tensor rows = indices({3});
  EXPECT_THROW(k().gather_rows_backward(dh.view, pout.view, rows.view), Error);  // row 3 of 3
  EXPECT_THROW(k().layernorm_backward(dh.view, TensorView{}, TensorView{}, h.view, h.view, TensorView{}, lse.view,
                                      lse.view, pout.view, Accumulate::no),
               Error);  // mean [3, 2], expected [3]
}

INSTANTIATE_TEST_SUITE_P(Kernels, Semantics, ::testing::Values(&reference_kernels(), &fast_kernels()),
                         [](const ::testing::TestParamInfo<const Kernels*>& info) {
                           return std::string(info.param->name) == "cpu-ref" ? "ref" : "fast";
                         });

}  // namespace
}  // namespace stoke::cpu
