// embedding_loss (backend/op_list.h) on the CPU kernel sets: the loss of
// every kind against a plain double computation written here from
// sentence-transformers' definitions (not from the kernels' formulas: the
// symmetric MNRL as the mean of two cross-entropies, CoSENT as one
// logsumexp over {0} and the pair differences), the gradient against central
// differences of that computation, the accumulation and weighting rules, the
// accuracy count, hand-checked values, and the refusals.
//
// Tolerances:
// - reference: the loss within 1e-12 relative of the double computation (the
//   same math in another order); its gradient, rounded once to f32, within
//   1e-5 relative L2 of the central differences (whose own error, h^2 times
//   the third derivative plus rounding over h, is near 1e-9 here);
// - fast: its similarities are f32 GEMMs of d terms of the centred rows and
//   its exponentials f32 (~2 ulp): each z carries an absolute error of about
//   scale * u * sqrt(d) (a random walk of d roundings, u = 2^-24), which
//   moves the loss by as much and the softmax gradient by as much
//   relatively: 1e-5 for scale 20 and d = 64, the bound used (kFastTol), for
//   loss and gradient alike. Measured: below 5e-7 everywhere; without the
//   centring (f32 unit vectors), 3e-5 and 3e-4 on the offset-100 calls of
//   FastMatchesReferenceOnLargerCalls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "cpu/kernels.h"
#include "support/host_tensors.h"

namespace stoke::cpu {
namespace {

using Kind = Ops::EmbeddingLoss::Kind;
using Tensor = test::host_tensors::HostTensor;
using test::host_tensors::get;
using test::host_tensors::set;
using Rng = test::host_tensors::Rng;

constexpr double kFastTol = 1e-5;

const Kernels* const kSets[] = {&reference_kernels(), &fast_kernels()};

Tensor make(DType t, std::vector<int64_t> shape) { return test::host_tensors::host_tensor(t, std::move(shape)); }

std::vector<double> values(const TensorView& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = get(t, i);
  return v;
}

double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return norm == 0.0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::mnrl: return "mnrl";
    case Kind::mnrl_symmetric: return "mnrl_symmetric";
    case Kind::cosent: return "cosent";
    default: return "cosine_mse";
  }
}

// ---- the loss, from sentence-transformers' definitions, in double ---------------------

struct Problem {
  Kind kind = Kind::mnrl;
  int64_t B = 4, groups = 2, D = 8, dims = 0;
  bool normalize = true;
  double scale = 20.0;
  std::vector<double> x;       // [groups * B, D], f32 values
  std::vector<double> scores;  // [B] (pair kinds)
  int64_t rows() const { return groups * B; }
  int64_t used() const { return dims ? dims : D; }
};

double logsumexp(const std::vector<double>& v) {
  const double mx = *std::max_element(v.begin(), v.end());
  double sum = 0.0;
  for (double e : v) sum += std::exp(e - mx);
  return mx + std::log(sum);
}

// torch.nn.functional.cross_entropy of one row of logits against `label`.
double cross_entropy(const std::vector<double>& logits, int64_t label) {
  return logsumexp(logits) - logits[static_cast<size_t>(label)];
}

struct Formula {
  double loss = 0.0;  // L (a mean over anchors for mnrl and cosine_mse)
  double hits = 0.0;  // anchors whose q2d row's first maximum is their positive
};

Formula formula(const Problem& p, const std::vector<double>& x) {
  const int64_t R = p.rows(), d = p.used(), B = p.B;
  auto at = [&](int64_t i, int64_t k) { return x[static_cast<size_t>(i * p.D + k)]; };
  std::vector<double> u(static_cast<size_t>(R * d));  // [R, d]
  for (int64_t i = 0; i < R; ++i) {
    double n = 0.0;
    for (int64_t k = 0; k < d; ++k) n += at(i, k) * at(i, k);
    n = p.normalize ? std::max(std::sqrt(n), 1e-12) : 1.0;  // F.normalize(x, dim=-1)
    for (int64_t k = 0; k < d; ++k) u[static_cast<size_t>(i * d + k)] = at(i, k) / n;
  }
  auto sim = [&](int64_t i, int64_t j) {
    double s = 0.0;
    for (int64_t k = 0; k < d; ++k) s += u[static_cast<size_t>(i * d + k)] * u[static_cast<size_t>(j * d + k)];
    return s;
  };
  Formula f;
  if (p.kind == Kind::mnrl || p.kind == Kind::mnrl_symmetric) {
    double q2d = 0.0, d2q = 0.0;
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> row;  // query b against torch.cat(docs): positives, then each negative column
      for (int64_t j = B; j < R; ++j) row.push_back(p.scale * sim(b, j));
      q2d += cross_entropy(row, b);
      if (std::max_element(row.begin(), row.end()) - row.begin() == b) f.hits += 1.0;
      std::vector<double> back;  // positive b against the queries
      for (int64_t c = 0; c < B; ++c) back.push_back(p.scale * sim(B + b, c));
      d2q += cross_entropy(back, b);
    }
    q2d /= static_cast<double>(B);
    d2q /= static_cast<double>(B);
    f.loss = p.kind == Kind::mnrl ? q2d : (q2d + d2q) / 2.0;  // partition_mode "per_direction": the mean
  } else if (p.kind == Kind::cosent) {
    std::vector<double> terms{0.0};  // torch.cat((zeros(1), scores.view(-1)))
    for (int64_t i = 0; i < B; ++i)
      for (int64_t j = 0; j < B; ++j)
        if (p.scores[static_cast<size_t>(i)] < p.scores[static_cast<size_t>(j)])
          terms.push_back(p.scale * sim(i, B + i) - p.scale * sim(j, B + j));
    f.loss = logsumexp(terms);
  } else {
    for (int64_t b = 0; b < B; ++b) {
      const double e = sim(b, B + b) - p.scores[static_cast<size_t>(b)];
      f.loss += e * e / static_cast<double>(B);
    }
  }
  return f;
}

// ---- running a kernel -----------------------------------------------------------------

Ops::EmbeddingLoss settings(const Problem& p) {
  Ops::EmbeddingLoss l;
  l.kind = p.kind;
  l.groups = p.groups;
  l.dims = p.dims;
  l.normalize = p.normalize;
  l.scale = static_cast<float>(p.scale);
  return l;
}

Tensor tensor_of(const std::vector<double>& v, std::vector<int64_t> shape) {
  Tensor t = make(DType::f32, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) set(t.view, static_cast<int64_t>(i), v[i]);
  return t;
}

struct Outputs {
  std::vector<double> grad, metrics;
};

// One call on zeroed d_emb and metrics (grad false: d_emb empty).
Outputs run(const Kernels& k, const Problem& p, const Ops::EmbeddingLoss& loss, bool grad = true) {
  const Tensor emb = tensor_of(p.x, {p.rows(), p.D});
  const bool pairs = p.kind == Kind::cosent || p.kind == Kind::cosine_mse;
  const Tensor scores = pairs ? tensor_of(p.scores, {p.B}) : Tensor{};
  Tensor d_emb = make(DType::f32, {p.rows(), p.D}), metrics = make(DType::f64, {3});
  Tensor ws = make(DType::f32, {embedding_loss_workspace_floats(p.B, p.groups, p.used())});
  k.embedding_loss(grad ? d_emb.view : TensorView{}, metrics.view, emb.view, scores.view, ws.view, loss);
  return {values(d_emb.view), values(metrics.view)};
}

// Rows drawn as offset + spread * U(-1, 1), rounded to f32 (the kernels' inputs).
Problem draw(Kind kind, int64_t B, int64_t groups, int64_t D, int64_t dims, bool normalize, double scale,
             uint64_t seed, double offset = 0.0, double spread = 1.0) {
  Problem p;
  p.kind = kind;
  p.B = B;
  p.groups = groups;
  p.D = D;
  p.dims = dims;
  p.normalize = normalize;
  p.scale = scale;
  Rng rng(seed);
  for (int64_t i = 0; i < p.rows() * D; ++i)
    p.x.push_back(static_cast<float>(offset + spread * rng.uniform(-1.0, 1.0)));
  // Scores on a coarse grid, so cosent meets ties (pairs that do not count).
  for (int64_t b = 0; b < B; ++b) p.scores.push_back(static_cast<double>(rng.below(5)) / 4.0);
  return p;
}

// The problems every formula test sweeps: each kind, groups 2 and 3 (mnrl
// kinds), the whole vector and a prefix, normalize on and off (mnrl kinds),
// and rows far from the origin (trained models' embeddings).
std::vector<Problem> sweep() {
  std::vector<Problem> out;
  uint64_t seed = 100;
  for (Kind kind : {Kind::mnrl, Kind::mnrl_symmetric, Kind::cosent, Kind::cosine_mse}) {
    const bool pairs = kind == Kind::cosent || kind == Kind::cosine_mse;
    for (int64_t groups : {2, 3}) {
      if (pairs && groups != 2) continue;
      for (int64_t dims : {0, 5})
        for (bool normalize : {true, false}) {
          if (kind == Kind::cosine_mse && !normalize) continue;
          const int64_t B = groups == 2 ? 5 : 4, D = dims ? 16 : 8;
          out.push_back(draw(kind, B, groups, D, dims, normalize, normalize ? 20.0 : 1.5, ++seed));
        }
      out.push_back(draw(kind, 6, groups, 12, 0, true, 20.0, ++seed, 100.0, 1.0));  // common offset 100
    }
  }
  return out;
}

std::string describe(const Problem& p) {
  return std::string(kind_name(p.kind)) + " B " + std::to_string(p.B) + " groups " + std::to_string(p.groups) +
         " D " + std::to_string(p.D) + " dims " + std::to_string(p.dims) + (p.normalize ? " normalized" : " dot") +
         " scale " + std::to_string(p.scale) + (p.x[0] > 50 ? " offset 100" : "");
}

// ---- (1) the loss -----------------------------------------------------------------------

TEST(EmbeddingLoss, LossMatchesTheDefinitions) {
  for (const Problem& p : sweep()) {
    SCOPED_TRACE(describe(p));
    const Formula want = formula(p, p.x);
    for (const Kernels* k : kSets) {
      SCOPED_TRACE(k->name);
      const Outputs got = run(*k, p, settings(p), false);
      const double tol = k == &reference_kernels() ? 1e-12 : kFastTol;
      EXPECT_NEAR(got.metrics[0], want.loss * static_cast<double>(p.B), tol * std::fabs(want.loss * p.B) + 1e-300);
      EXPECT_EQ(got.metrics[1], want.hits);
      EXPECT_EQ(got.metrics[2], static_cast<double>(p.B));
      // The gradient is not asked for: the loss alone, and the same loss.
      const Outputs with_grad = run(*k, p, settings(p), true);
      EXPECT_EQ(with_grad.metrics, got.metrics);
    }
  }
}

// ---- (2) the gradient against central differences --------------------------------------

std::vector<double> finite_differences(const Problem& p) {
  std::vector<double> g(p.x.size());
  std::vector<double> x = p.x;
  for (size_t i = 0; i < x.size(); ++i) {
    const double h = 1e-5 * std::max(1.0, std::fabs(x[i]));
    const double at = x[i];
    x[i] = at + h;
    const double up = formula(p, x).loss;
    x[i] = at - h;
    const double down = formula(p, x).loss;
    x[i] = at;
    g[i] = (up - down) / (2.0 * h);
  }
  return g;
}

TEST(EmbeddingLoss, GradientMatchesFiniteDifferences) {
  for (const Problem& p : sweep()) {
    SCOPED_TRACE(describe(p));
    const std::vector<double> want = finite_differences(p);
    for (const Kernels* k : kSets) {
      SCOPED_TRACE(k->name);
      const Outputs got = run(*k, p, settings(p));
      EXPECT_LE(relative_error(got.grad, want), k == &reference_kernels() ? 1e-5 : kFastTol);
      // Columns past the prefix get nothing.
      for (int64_t i = 0; i < p.rows(); ++i)
        for (int64_t c = p.used(); c < p.D; ++c) EXPECT_EQ(got.grad[static_cast<size_t>(i * p.D + c)], 0.0);
    }
  }
}

// Larger calls (threads, several column blocks, the GEMMs' real shapes), the
// fast set against the reference, including rows with a common offset: the
// fast set's centring is what keeps their gradient (it lives in the rows'
// small differences) to f32 accuracy; without it, f32 unit vectors would
// leave about u * offset / spread ~ 6e-6 relative per element of noise.
TEST(EmbeddingLoss, FastMatchesReferenceOnLargerCalls) {
  struct Shape {
    Kind kind;
    int64_t B, groups, D, dims;
    double offset, spread;
  };
  const Shape shapes[] = {{Kind::mnrl, 300, 2, 64, 0, 0.0, 1.0},        {Kind::mnrl, 130, 3, 70, 48, 0.0, 1.0},
                          {Kind::mnrl_symmetric, 200, 3, 64, 0, 0.0, 1.0}, {Kind::mnrl, 256, 2, 64, 0, 100.0, 1.0},
                          {Kind::mnrl_symmetric, 256, 2, 64, 32, 100.0, 0.1}, {Kind::cosent, 300, 2, 64, 0, 0.0, 1.0},
                          {Kind::cosine_mse, 300, 2, 64, 16, 100.0, 1.0}};
  uint64_t seed = 7;
  for (const Shape& s : shapes) {
    const Problem p = draw(s.kind, s.B, s.groups, s.D, s.dims, true, 20.0, ++seed, s.offset, s.spread);
    SCOPED_TRACE(describe(p) + " spread " + std::to_string(s.spread));
    const Outputs want = run(reference_kernels(), p, settings(p)), got = run(fast_kernels(), p, settings(p));
    EXPECT_LE(relative_error(got.grad, want.grad), kFastTol);
    EXPECT_NEAR(got.metrics[0], want.metrics[0], kFastTol * std::fabs(want.metrics[0]));
    EXPECT_EQ(got.metrics[1], want.metrics[1]);
    EXPECT_EQ(got.metrics[2], want.metrics[2]);
  }
}

// ---- (3) accumulation, weights, count, columns ------------------------------------------

TEST(EmbeddingLoss, AccumulatesAndWeights) {
  for (Kind kind : {Kind::mnrl, Kind::mnrl_symmetric, Kind::cosent, Kind::cosine_mse}) {
    const Problem p = draw(kind, 5, 2, 12, 7, true, 20.0, 31);
    SCOPED_TRACE(kind_name(kind));
    for (const Kernels* k : kSets) {
      SCOPED_TRACE(k->name);
      const Outputs plain = run(*k, p, settings(p));
      const Tensor emb = tensor_of(p.x, {p.rows(), p.D});
      const bool pairs = kind == Kind::cosent || kind == Kind::cosine_mse;
      const Tensor scores = pairs ? tensor_of(p.scores, {p.B}) : Tensor{};
      Tensor ws = make(DType::f32, {embedding_loss_workspace_floats(p.B, p.groups, p.used())});
      // d_emb and metrics start from values already there.
      Rng rng(5);
      Tensor d_emb = make(DType::f32, {p.rows(), p.D});
      for (int64_t i = 0; i < d_emb.view.numel(); ++i) set(d_emb.view, i, rng.uniform(-1, 1));
      const std::vector<double> before = values(d_emb.view);
      Tensor metrics = make(DType::f64, {3});
      for (int i = 0; i < 3; ++i) metrics.view.as<double>()[i] = 10.0 + i;
      Ops::EmbeddingLoss l = settings(p);
      l.weight = 0.5f;
      l.grad_scale = 0.25f;
      k->embedding_loss(d_emb.view, metrics.view, emb.view, scores.view, ws.view, l);  // counts
      l.count = false;
      k->embedding_loss(d_emb.view, metrics.view, emb.view, scores.view, ws.view, l);  // adds its loss only
      const std::vector<double> after = values(d_emb.view), m = values(metrics.view);
      // Two calls of weight 0.5: the loss once in full; the counts once.
      EXPECT_NEAR(m[0], 10.0 + plain.metrics[0], 1e-12 * std::fabs(plain.metrics[0]) + 1e-12);
      EXPECT_EQ(m[1], 11.0 + plain.metrics[1]);
      EXPECT_EQ(m[2], 12.0 + plain.metrics[2]);
      // Each call adds grad_scale * weight = 1/8 of the plain gradient g, in
      // double, rounded once into d_emb: two roundings of values up to
      // |before| + |2 g / 8|, and plain.grad is g rounded once.
      for (size_t i = 0; i < after.size(); ++i) {
        const double want = before[i] + 2.0 * 0.125 * plain.grad[i];
        EXPECT_NEAR(after[i], want, 4 * 0x1.0p-24 * (std::fabs(before[i]) + std::fabs(want))) << "element " << i;
      }
      for (int64_t i = 0; i < p.rows(); ++i)
        for (int64_t c = p.used(); c < p.D; ++c)  // past the prefix: the very bits that were there
          EXPECT_EQ(after[static_cast<size_t>(i * p.D + c)], before[static_cast<size_t>(i * p.D + c)]);
    }
  }
}

// ---- (4) the accuracy count -----------------------------------------------------------

TEST(EmbeddingLoss, CountsAnchorsWhosePositiveRanksFirst) {
  // Anchors e_0..e_3 (D = 6); positives near their anchors but for anchor 3,
  // whose positive is e_5 while negative 3 (its row's candidate 7) is e_3:
  // three hits, and the miss's argmax is a negative.
  const int64_t B = 4, D = 6;
  Problem p;
  p.B = B;
  p.groups = 3;
  p.D = D;
  p.scale = 20.0;
  p.x.assign(static_cast<size_t>(3 * B * D), 0.0);
  auto at = [&](int64_t row, int64_t col) -> double& { return p.x[static_cast<size_t>(row * D + col)]; };
  for (int64_t b = 0; b < B; ++b) {
    at(b, b) = 1.0;
    at(2 * B + b, 4) = 1.0;  // negatives: e_4
  }
  for (int64_t b = 0; b < 3; ++b) {
    at(B + b, b) = 1.0;
    at(B + b, 5) = 0.25;
  }
  at(B + 3, 5) = 1.0;
  at(2 * B + 3, 4) = 0.0;
  at(2 * B + 3, 3) = 1.0;
  for (Kind kind : {Kind::mnrl, Kind::mnrl_symmetric}) {
    p.kind = kind;
    ASSERT_EQ(formula(p, p.x).hits, 3.0);
    for (const Kernels* k : kSets) EXPECT_EQ(run(*k, p, settings(p)).metrics[1], 3.0) << k->name;
  }
  // A tie goes to the first maximum: positive 1 equal to positive 0 makes
  // anchor 1's first maximum candidate 0 (a miss) and anchor 0's a hit.
  p.kind = Kind::mnrl;
  for (int64_t c = 0; c < D; ++c) at(B + 1, c) = at(B + 0, c);
  at(1, 0) = 1.0;  // anchor 1 = e_0 + e_1: positives 0 and 1 tie at the top
  ASSERT_EQ(formula(p, p.x).hits, 2.0);
  EXPECT_EQ(run(reference_kernels(), p, settings(p)).metrics[1], 2.0);
  // The pair kinds count no hits.
  Problem q = draw(Kind::cosent, 4, 2, 8, 0, true, 20.0, 3);
  for (Kind kind : {Kind::cosent, Kind::cosine_mse}) {
    q.kind = kind;
    for (const Kernels* k : kSets) {
      const Outputs o = run(*k, q, settings(q));
      EXPECT_EQ(o.metrics[1], 0.0) << k->name;
      EXPECT_EQ(o.metrics[2], 4.0) << k->name;
    }
  }
}

// ---- known numbers ----------------------------------------------------------------------

// B = 2, anchors = positives = e_0, e_1 (D = 2), scale 1: the q2d logits are
// the identity, each row's cross-entropy log(e + 1) - 1 = log(1 + 1/e) =
// 0.31326168751822286, and the symmetric loss (a symmetric matrix) the same.
// With q = 1 / (2 (1 + e)) = 0.13447071068499755, dL/dz = (p - onehot) / B
// is (-q, q) for anchor 0 and (q, -q) for anchor 1. Anchor 0's gradient
// -q p_0 + q p_1 = (-q, q) loses its part along a_0 = e_0 in the
// normalization's backward: (0, q); anchor 1's (q, -q) keeps (q, 0).
// Positive 0 gets -q a_0 + q a_1 -> (0, q), positive 1 (q, 0). The
// symmetric loss: half of that from each direction, the same by symmetry.
// CoSENT with scores (1, 0) (scale 20, both cosines 1): the one pair (1, 0)
// has difference 0, L = log(1 + e^0) = log 2. CosineSimilarity with scores
// (1, 0.5): L = ((1 - 1)^2 + (1 - 0.5)^2) / 2 = 0.125.
TEST(EmbeddingLoss, HandCheckedValues) {
  Problem p;
  p.B = 2;
  p.D = 2;
  p.x = {1, 0, 0, 1, 1, 0, 0, 1};
  p.scale = 1.0;
  const double ce = 0.31326168751822286, g = 0.13447071068499755;
  for (const Kernels* k : kSets) {
    SCOPED_TRACE(k->name);
    p.kind = Kind::mnrl;
    Outputs o = run(*k, p, settings(p));
    EXPECT_NEAR(o.metrics[0], 2 * ce, 2e-7);
    EXPECT_EQ(o.metrics[1], 2.0);
    const std::vector<double> want = {0, g, g, 0, 0, g, g, 0};  // rows a_0, a_1, p_0, p_1
    EXPECT_LE(relative_error(o.grad, want), 1e-6);
    p.kind = Kind::mnrl_symmetric;
    o = run(*k, p, settings(p));
    EXPECT_NEAR(o.metrics[0], 2 * ce, 2e-7);
    EXPECT_LE(relative_error(o.grad, want), 1e-6);
    p.kind = Kind::cosent;
    p.scale = 20.0;
    p.scores = {1.0, 0.0};
    o = run(*k, p, settings(p));
    EXPECT_NEAR(o.metrics[0], 2 * std::log(2.0), 2e-7);
    p.kind = Kind::cosine_mse;
    p.scores = {1.0, 0.5};
    o = run(*k, p, settings(p));
    EXPECT_NEAR(o.metrics[0], 2 * 0.125, 2e-7);
    p.scale = 1.0;
  }
}

// ---- (5) refusals ---------------------------------------------------------------------------

TEST(EmbeddingLoss, RefusesBadCalls) {
  const Tensor emb = make(DType::f32, {8, 4}), odd = make(DType::f32, {7, 4}), emb6 = make(DType::f32, {6, 4});
  const Tensor scores = make(DType::f32, {4}), scores_bad = make(DType::f32, {3}), scores2 = make(DType::f32, {2});
  Tensor ws = make(DType::f32, {embedding_loss_workspace_floats(4, 2, 4)});
  Tensor small = make(DType::f32, {embedding_loss_workspace_floats(4, 2, 4) - 1});
  Tensor d_emb = make(DType::f32, {8, 4}), d_bad = make(DType::f32, {8, 3});
  Tensor metrics = make(DType::f64, {3}), metrics32 = make(DType::f32, {3});
  const Tensor none = make(DType::f32, {0, 4});
  Ops::EmbeddingLoss mnrl, cosent, mse;
  cosent.kind = Ops::EmbeddingLoss::Kind::cosent;
  mse.kind = Ops::EmbeddingLoss::Kind::cosine_mse;
  for (const Kernels* k : kSets) {
    SCOPED_TRACE(k->name);
    auto call = [&](const Tensor& de, const Tensor& m, const Tensor& e, const Tensor& s, const Tensor& w,
                    const Ops::EmbeddingLoss& l) { k->embedding_loss(de.view, m.view, e.view, s.view, w.view, l); };
    const Tensor empty;
    EXPECT_NO_THROW(call(d_emb, metrics, emb, empty, ws, mnrl));
    EXPECT_NO_THROW(call(d_emb, metrics, emb, scores, ws, cosent));
    EXPECT_THROW(call(d_emb, metrics, odd, empty, ws, mnrl), Error);  // 7 rows, groups 2
    Ops::EmbeddingLoss three = cosent;
    three.groups = 3;
    Tensor ws3 = make(DType::f32, {embedding_loss_workspace_floats(2, 3, 4)});
    EXPECT_THROW(call(empty, metrics, emb6, scores2, ws3, three), Error);  // cosent with negatives
    EXPECT_THROW(call(d_emb, metrics, emb, empty, ws, cosent), Error);       // scores missing
    EXPECT_THROW(call(d_emb, metrics, emb, empty, ws, mse), Error);          // scores missing
    EXPECT_THROW(call(d_emb, metrics, emb, scores_bad, ws, cosent), Error);  // scores [3] for B = 4
    EXPECT_THROW(call(d_emb, metrics, emb, scores, ws, mnrl), Error);        // scores for mnrl
    EXPECT_THROW(call(d_emb, metrics, emb, empty, small, mnrl), Error);      // workspace one float short
    EXPECT_THROW(call(d_bad, metrics, emb, empty, ws, mnrl), Error);         // d_emb shape
    EXPECT_THROW(call(d_emb, metrics32, emb, empty, ws, mnrl), Error);       // f32 metrics
    EXPECT_THROW(call(d_emb, metrics, none, empty, ws, mnrl), Error);        // no anchors
    EXPECT_THROW(call(d_emb, metrics, emb, empty, d_emb, mnrl), Error);      // workspace is d_emb
    Ops::EmbeddingLoss bad = mnrl;
    bad.dims = 5;  // D = 4
    EXPECT_THROW(call(d_emb, metrics, emb, empty, ws, bad), Error);
    bad = mnrl;
    bad.groups = 1;
    EXPECT_THROW(call(d_emb, metrics, emb, empty, ws, bad), Error);
    bad = mnrl;
    bad.scale = std::numeric_limits<float>::infinity();
    EXPECT_THROW(call(d_emb, metrics, emb, empty, ws, bad), Error);
    bad = mse;
    bad.normalize = false;  // cosine_mse compares cosines
    EXPECT_THROW(call(d_emb, metrics, emb, scores, ws, bad), Error);
    bad = mnrl;
    bad.kind = static_cast<Ops::EmbeddingLoss::Kind>(9);
    EXPECT_THROW(call(d_emb, metrics, emb, empty, ws, bad), Error);
  }
  EXPECT_THROW(embedding_loss_workspace_floats(4, 2, 0), Error);  // dims: the columns read, D for "all"
}

}  // namespace
}  // namespace stoke::cpu
