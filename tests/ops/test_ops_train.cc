// The training ops of the CPU op table (dropout, cross-entropy, MSE,
// sum_squares, clip_scale, AdamW): the reference kernels against hand-computed
// values, finite differences and torch.optim.AdamW; the fast kernels against
// the reference; and the ops through the backend's stream.
//
// Tolerances:
// - dropout: bit-exact (both sets draw the same Philox mask and do the same
//   single f32 multiply);
// - cross-entropy dlogits: relative 1e-5 of the whole output (the fast set's
//   exp is good to 2e-7 and its row sums are f32); the loss sum 1e-6 relative;
//   correct counts exactly;
// - AdamW: each element within a few ulps of torch (relative 1e-6, or 1e-7 of
//   the largest element where a moment update cancels) after three steps: the
//   fast set does torch's f32 operations in torch's order; the reference does
//   the same math in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/philox.h"
#include "cpu/cpu_backend.h"
#include "cpu/kernels.h"
#include "support/host_tensors.h"

namespace stoke::cpu {
namespace {

// ---- host tensors ------------------------------------------------------------

using Tensor = test::host_tensors::HostTensor;  // deep-copying storage + view (support/host_tensors.h)
using test::host_tensors::get;
using test::host_tensors::set;
Tensor make(DType t, std::vector<int64_t> shape) { return test::host_tensors::host_tensor(t, std::move(shape)); }

Tensor from(DType t, std::vector<int64_t> shape, const std::vector<double>& values) {
  Tensor x = make(t, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) set(x.view, static_cast<int64_t>(i), values[i]);
  return x;
}

std::vector<double> values(const TensorView& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = get(t, i);
  return v;
}

// The raw bytes, for bit-exact comparisons.
std::vector<uint8_t> bytes(const TensorView& t) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  return std::vector<uint8_t>(p, p + t.bytes());
}

using Rng = test::host_tensors::Rng;  // splitmix64 (support/host_tensors.h)

Tensor random(Rng& rng, DType t, std::vector<int64_t> shape, double lo = -1.0, double hi = 1.0) {
  Tensor x = make(t, std::move(shape));
  for (int64_t i = 0; i < x.view.numel(); ++i) set(x.view, i, rng.uniform(lo, hi));
  return x;
}

double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return norm == 0.0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

// v rounded to dtype t (as a store does), read back.
double round_to(DType t, float v) {
  Tensor s = make(t, {1});
  set(s.view, 0, v);
  return get(s.view, 0);
}

const char* dname(DType t) { return t == DType::f32 ? "f32" : t == DType::bf16 ? "bf16" : "f16"; }

const Kernels* const kSets[] = {&reference_kernels(), &fast_kernels()};

// ---- dropout -------------------------------------------------------------------------

TEST(Dropout, FastEqualsReferenceBitForBit) {
  const int64_t sizes[] = {0, 1, 3, 4, 5, 7, 16, 1023, 1024, 1025, 3 * 1024 + 2, 100003};
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t n : sizes)
      for (float p : {0.0f, 0.1f, 0.5f, 0.9f, 1.0f})
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(std::string(dname(t)) + " n " + std::to_string(n) + " p " + std::to_string(p) +
                       (in_place ? " in place" : ""));
          Rng rng(static_cast<uint64_t>(n) * 31 + static_cast<uint64_t>(p * 100));
          Tensor x = random(rng, t, {n}, -4.0, 4.0);
          std::vector<std::vector<uint8_t>> outs;
          for (const Kernels* k : kSets) {
            Tensor in = x, out = make(t, {n});
            const TensorView& dst = in_place ? in.view : out.view;
            k->dropout(dst, in.view, p, 0xfeedfacecafebeefull, 11, 5, 0);
            outs.push_back(bytes(dst));
          }
          ASSERT_EQ(outs[0], outs[1]);
        }
}

// The mask is Philox's: element i is kept iff uniform(seed, step, tensor, i) >= p,
// and a kept element is x * f32(1 / (1 - p)).
TEST(Dropout, MaskIsTheDocumentedPhiloxDraw) {
  const int64_t n = 4099;  // not a multiple of 4: the last block is partial
  const float p = 0.3f, scale = 1.0f / (1.0f - p);
  std::vector<float> u(static_cast<size_t>(n));
  philox::fill_uniform(77, 3, 12, 0, n, u.data());
  Rng rng(5);
  Tensor x = random(rng, DType::f32, {n}, 0.5, 2.0);  // never zero: zero output means dropped
  for (const Kernels* k : kSets) {
    Tensor out = make(DType::f32, {n});
    k->dropout(out.view, x.view, p, 77, 3, 12, 0);
    for (int64_t i = 0; i < n; ++i) {
      const float want = u[static_cast<size_t>(i)] >= p ? x.view.as<float>()[i] * scale : 0.0f;
      ASSERT_EQ(out.view.as<float>()[i], want) << k->name << " element " << i;
    }
  }
}

// row_offset: a batch split by rows (data parallelism: each rank a slice)
// draws, part by part, exactly the whole batch's mask when each part passes
// the rows before it. Widths 64 (offsets on a Philox block boundary), 63 and
// 7 (inside a block), split points at 1, the middle and the last row.
TEST(Dropout, APartWithItsRowOffsetDrawsTheWholeBatchsMask) {
  const int64_t T = 41;
  for (DType t : {DType::f32, DType::bf16})
    for (int64_t W : {64, 63, 7})
      for (int64_t split : {1, 17, 40})
        for (const Kernels* k : kSets) {
          SCOPED_TRACE(std::string(k->name) + " " + dname(t) + " width " + std::to_string(W) + " split " +
                       std::to_string(split));
          Rng rng(static_cast<uint64_t>(W * 100 + split));
          Tensor x = random(rng, t, {T, W}, 0.5, 2.0), whole = make(t, {T, W}), parts = make(t, {T, W});
          k->dropout(whole.view, x.view, 0.1f, 0x5eed, 9, 4, 0);
          const size_t row_bytes = static_cast<size_t>(W) * dtype_size(t);
          const std::pair<int64_t, int64_t> halves[] = {{0, split}, {split, T - split}};  // first row, rows
          for (const auto& [first, rows] : halves) {
            TensorView in = x.view, out = parts.view;
            in.data = static_cast<uint8_t*>(x.view.data) + static_cast<size_t>(first) * row_bytes;
            out.data = static_cast<uint8_t*>(parts.view.data) + static_cast<size_t>(first) * row_bytes;
            in.dims[0] = out.dims[0] = rows;
            k->dropout(out, in, 0.1f, 0x5eed, 9, 4, static_cast<uint64_t>(first));
          }
          ASSERT_EQ(bytes(whole.view), bytes(parts.view));
          // Another offset is another mask (the offset is not ignored).
          Tensor shifted = make(t, {T, W});
          k->dropout(shifted.view, x.view, 0.1f, 0x5eed, 9, 4, 1);
          EXPECT_NE(bytes(whole.view), bytes(shifted.view));
        }
}

TEST(Dropout, RefusesARowOffsetPastTheIndexRange) {
  Tensor x = make(DType::f32, {4, 8}), out = make(DType::f32, {4, 8});
  for (const Kernels* k : kSets) {
    EXPECT_THROW(k->dropout(out.view, x.view, 0.1f, 1, 1, 1, uint64_t{1} << 62), Error) << k->name;
    EXPECT_NO_THROW(k->dropout(out.view, x.view, 0.1f, 1, 1, 1, uint64_t{1} << 58)) << k->name;
  }
}

// The share of dropped elements is Binomial(n, p): within 6 standard deviations.
TEST(Dropout, DropRateWithinStatisticalBounds) {
  const int64_t n = 1 << 20;
  Tensor x = make(DType::f32, {n});
  for (int64_t i = 0; i < n; ++i) x.view.as<float>()[i] = 1.0f;
  for (float p : {0.01f, 0.1f, 0.5f, 0.9f}) {
    Tensor out = make(DType::f32, {n});
    fast_kernels().dropout(out.view, x.view, p, 1234, 0, 0, 0);
    int64_t dropped = 0;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      dropped += out.view.as<float>()[i] == 0.0f;
      sum += out.view.as<float>()[i];
    }
    const double sd = std::sqrt(static_cast<double>(n) * p * (1.0 - p));
    EXPECT_NEAR(static_cast<double>(dropped), n * static_cast<double>(p), 6.0 * sd) << "p " << p;
    // Inverted dropout keeps the expectation: the mean output is 1 within the same bound, scaled.
    EXPECT_NEAR(sum / n, 1.0, 6.0 * sd / n / (1.0 - p)) << "p " << p;
  }
}

TEST(Dropout, BackwardAppliesTheForwardMask) {
  const int64_t n = 5000;
  const float p = 0.25f;
  Rng rng(9);
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (const Kernels* k : kSets) {
      Tensor x = random(rng, t, {n}, 0.5, 2.0), dy = random(rng, t, {n});
      Tensor y = make(t, {n}), dx = make(t, {n}), dy_fwd = make(t, {n});
      k->dropout(y.view, x.view, p, 99, 4, 2, 0);
      k->dropout_backward(dx.view, dy.view, p, 99, 4, 2, 0);
      k->dropout(dy_fwd.view, dy.view, p, 99, 4, 2, 0);
      EXPECT_EQ(bytes(dx.view), bytes(dy_fwd.view)) << k->name << " " << dname(t);
      const float scale = 1.0f / (1.0f - p);
      for (int64_t i = 0; i < n; ++i) {
        const bool kept = get(y.view, i) != 0.0;
        const double want = kept ? round_to(t, static_cast<float>(get(dy.view, i)) * scale) : 0.0;
        ASSERT_EQ(get(dx.view, i), want) << k->name << " " << dname(t) << " element " << i;
      }
    }
}

TEST(Dropout, DeterministicAndKeyedBySeedStepAndTensor) {
  const int64_t n = 2048;
  Rng rng(3);
  Tensor x = random(rng, DType::f32, {n}, 0.5, 1.5);
  auto run = [&](uint64_t seed, uint32_t step, uint32_t tensor_id) {
    Tensor out = make(DType::f32, {n});
    fast_kernels().dropout(out.view, x.view, 0.5f, seed, step, tensor_id, 0);
    return bytes(out.view);
  };
  const auto base = run(1, 2, 3);
  EXPECT_EQ(base, run(1, 2, 3));
  EXPECT_NE(base, run(2, 2, 3));
  EXPECT_NE(base, run(1, 3, 3));
  EXPECT_NE(base, run(1, 2, 4));
}

TEST(Dropout, ZeroCopiesAndOneZeroes) {
  Tensor x = from(DType::bf16, {5}, {1.5, -2.0, 0.0, 3.25, -0.125});
  for (const Kernels* k : kSets) {
    Tensor out = make(DType::bf16, {5});
    k->dropout(out.view, x.view, 0.0f, 1, 1, 1, 0);
    EXPECT_EQ(bytes(out.view), bytes(x.view)) << k->name;
    k->dropout(out.view, x.view, 1.0f, 1, 1, 1, 0);
    for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(get(out.view, i), 0.0) << k->name;
  }
}

// Ops::DropoutStep: a step in device memory (a replayed graph's) draws the
// very mask of the same step passed as a value — dropout, its backward, and
// the attention probabilities' (forward and backward) — read when the op
// runs; a device step of another dtype or size is refused.
TEST(Dropout, ADeviceStepDrawsTheHostStepsMask) {
  Rng rng(21);
  const int64_t n = 1031;
  Tensor x = random(rng, DType::f32, {n}, -2.0, 2.0);
  uint32_t step_value = 11;
  const TensorView step_mem(&step_value, DType::u32, {1});
  const Ops::DropoutStep device_step(step_mem);
  for (const Kernels* k : kSets) {
    Tensor want = make(DType::f32, {n}), got = make(DType::f32, {n});
    k->dropout(want.view, x.view, 0.3f, 99, 11, 4, 5);
    k->dropout(got.view, x.view, 0.3f, 99, device_step, 4, 5);
    EXPECT_EQ(bytes(want.view), bytes(got.view)) << k->name;
    k->dropout_backward(want.view, x.view, 0.3f, 99, 11, 4, 5);
    k->dropout_backward(got.view, x.view, 0.3f, 99, device_step, 4, 5);
    EXPECT_EQ(bytes(want.view), bytes(got.view)) << k->name;
    // Attention: 2 sequences, 2 heads of 8.
    const int64_t T = 13;
    Tensor qkv = random(rng, DType::f32, {T, 48}, -2.0, 2.0), dout = random(rng, DType::f32, {T, 16}, -1.0, 1.0);
    std::vector<int32_t> cu_host{0, 6, 13};
    const TensorView cu(cu_host.data(), DType::i32, {3});
    Ops::AttentionDropout host_drop{0.2f, 99, 11, 3, 0};
    Ops::AttentionDropout dev_drop = host_drop;
    dev_drop.step = device_step;
    Tensor out_w = make(DType::f32, {T, 16}), out_g = make(DType::f32, {T, 16});
    Tensor lse_w = make(DType::f32, {T, 2}), lse_g = make(DType::f32, {T, 2});
    k->attention_train(out_w.view, lse_w.view, qkv.view, cu, 2, 7, 0, host_drop);
    k->attention_train(out_g.view, lse_g.view, qkv.view, cu, 2, 7, 0, dev_drop);
    EXPECT_EQ(bytes(out_w.view), bytes(out_g.view)) << k->name;
    Tensor dq_w = make(DType::f32, {T, 48}), dq_g = make(DType::f32, {T, 48});
    k->attention_backward(dq_w.view, dout.view, qkv.view, out_w.view, lse_w.view, cu, 2, 7, 0, host_drop);
    k->attention_backward(dq_g.view, dout.view, qkv.view, out_w.view, lse_w.view, cu, 2, 7, 0, dev_drop);
    EXPECT_EQ(bytes(dq_w.view), bytes(dq_g.view)) << k->name;
    // Another value in the device step: another mask.
    step_value = 12;
    k->dropout(got.view, x.view, 0.3f, 99, device_step, 4, 5);
    k->dropout(want.view, x.view, 0.3f, 99, 11, 4, 5);
    EXPECT_NE(bytes(want.view), bytes(got.view)) << k->name;
    step_value = 11;
    int32_t wrong_value = 11;
    const Ops::DropoutStep wrong(TensorView(&wrong_value, DType::i32, {1}));
    EXPECT_THROW(k->dropout(got.view, x.view, 0.3f, 99, wrong, 4, 5), Error) << k->name;
    Ops::AttentionDropout wrong_drop = host_drop;
    wrong_drop.step = wrong;
    EXPECT_THROW(k->attention_train(out_g.view, lse_g.view, qkv.view, cu, 2, 7, 0, wrong_drop), Error) << k->name;
  }
}

TEST(Dropout, RefusesBadCalls) {
  Tensor x = make(DType::f32, {8}), out16 = make(DType::f16, {8}), out7 = make(DType::f32, {7});
  Tensor out = make(DType::f32, {8});
  for (const Kernels* k : kSets) {
    EXPECT_THROW(k->dropout(out16.view, x.view, 0.1f, 1, 1, 1, 0), Error);  // dtype differs
    EXPECT_THROW(k->dropout(out7.view, x.view, 0.1f, 1, 1, 1, 0), Error);   // shape differs
    EXPECT_THROW(k->dropout(out.view, x.view, 1.5f, 1, 1, 1, 0), Error);    // p > 1
    EXPECT_THROW(k->dropout(out.view, x.view, -0.1f, 1, 1, 1, 0), Error);
    EXPECT_THROW(k->dropout(out.view, x.view, NAN, 1, 1, 1, 0), Error);
    TensorView shifted = x.view;  // overlapping by all but one element
    shifted.data = x.view.as<float>() + 1;
    shifted.dims[0] = 7;
    TensorView head = x.view;
    head.dims[0] = 7;
    EXPECT_THROW(k->dropout(shifted, head, 0.1f, 1, 1, 1, 0), Error);
  }
}

// ---- cross-entropy and MSE ---------------------------------------------------------------

// logits [[1, 2, 3], [0, 0, 0]], labels [2, 1], mean over the batch (scale 1/2):
// row 0: lse = 3 + log(1 + e^-1 + e^-2), loss = log(1.50321472) = 0.407605964,
//        softmax = [0.0900305732, 0.244728471, 0.665240956];
// row 1: loss = log 3 = 1.09861229, softmax = 1/3 each; its argmax is the first
//        maximum, class 0, not the label 1.
// With label smoothing 0.1 the targets are 0.9 * onehot + 0.1 / 3 and row 0's
// loss gains 0.1 * (mean_c (lse - z_c) - (lse - z_2)) = 0.1: 0.507605964.
TEST(CrossEntropy, HandComputed) {
  struct Want {
    float eps;
    double loss_sum;
    std::vector<double> grad;
  };
  const Want wants[] = {
      {0.0f, 1.50621825, {0.0450152866, 0.122364236, -0.167379522, 0.166666667, -0.333333333, 0.166666667}},
      {0.1f, 1.60621825, {0.0283486199, 0.105697569, -0.134046189, 0.15, -0.3, 0.15}},
  };
  for (const Kernels* k : kSets)
    for (const Want& w : wants) {
      Tensor z = from(DType::f32, {2, 3}, {1, 2, 3, 0, 0, 0}), y = from(DType::i32, {2}, {2, 1});
      Tensor dz = make(DType::f32, {2, 3}), metrics = make(DType::f64, {3});
      k->cross_entropy(dz.view, metrics.view, z.view, y.view, w.eps, 0.5f);
      const std::vector<double> m = values(metrics.view), g = values(dz.view);
      EXPECT_NEAR(m[0], w.loss_sum, 2e-7) << k->name << " eps " << w.eps;
      EXPECT_EQ(m[1], 1.0) << k->name;  // row 0 right, row 1 wrong (tie -> class 0)
      EXPECT_EQ(m[2], 2.0) << k->name;
      for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w.grad[i], 2e-7) << k->name << " element " << i;
    }
}

// The metrics accumulate over calls; without dlogits (evaluation) only the metrics move.
TEST(CrossEntropy, MetricsAccumulateAndEvalSkipsGradients) {
  for (const Kernels* k : kSets) {
    Tensor z = from(DType::f32, {2, 3}, {1, 2, 3, 0, 0, 0}), y = from(DType::i32, {2}, {2, 1});
    Tensor metrics = from(DType::f64, {3}, {10.0, 4.0, 8.0});
    k->cross_entropy(TensorView{}, metrics.view, z.view, y.view, 0.0f, 1.0f);
    k->cross_entropy(TensorView{}, metrics.view, z.view, y.view, 0.0f, 1.0f);
    const std::vector<double> m = values(metrics.view);
    EXPECT_NEAR(m[0], 10.0 + 2 * 1.50621825, 4e-7) << k->name;
    EXPECT_EQ(m[1], 6.0) << k->name;
    EXPECT_EQ(m[2], 12.0) << k->name;
  }
}

TEST(CrossEntropy, InPlaceEqualsOutOfPlace) {
  Rng rng(21);
  Tensor z = random(rng, DType::f32, {5, 9}, -3, 3), y = from(DType::i32, {5}, {0, 8, 3, 3, 1});
  for (const Kernels* k : kSets) {
    Tensor dz = make(DType::f32, {5, 9}), zz = z;
    k->cross_entropy(dz.view, TensorView{}, z.view, y.view, 0.05f, 0.2f);
    k->cross_entropy(zz.view, TensorView{}, zz.view, y.view, 0.05f, 0.2f);
    EXPECT_EQ(bytes(zz.view), bytes(dz.view)) << k->name;
  }
}

// Central differences of the summed loss (reference kernel, metrics in double)
// against dlogits with scale 1. Logits lie on a 1/8 grid and h = 2^-8, so
// z +- h is exact in f32; the truncation error, about h^2 / 6 times the third
// derivative, is below 1e-5.
TEST(CrossEntropy, GradientMatchesFiniteDifferences) {
  Rng rng(8);
  const int64_t B = 3, C = 5;
  for (float eps : {0.0f, 0.2f}) {
    Tensor z = make(DType::f32, {B, C});
    for (int64_t i = 0; i < B * C; ++i) z.view.as<float>()[i] = static_cast<float>(rng.below(33) - 16) / 8.0f;
    Tensor y = from(DType::i32, {B}, {4, 0, 2});
    auto loss = [&](const Tensor& at) {
      Tensor metrics = make(DType::f64, {3});
      reference_kernels().cross_entropy(TensorView{}, metrics.view, at.view, y.view, eps, 1.0f);
      return metrics.view.as<double>()[0];
    };
    for (const Kernels* k : kSets) {
      Tensor dz = make(DType::f32, {B, C});
      k->cross_entropy(dz.view, TensorView{}, z.view, y.view, eps, 1.0f);
      const float h = 0x1.0p-8f;
      for (int64_t i = 0; i < B * C; ++i) {
        Tensor up = z, down = z;
        up.view.as<float>()[i] += h;
        down.view.as<float>()[i] -= h;
        const double fd = (loss(up) - loss(down)) / (2.0 * h);
        EXPECT_NEAR(dz.view.as<float>()[i], fd, 1e-5) << k->name << " eps " << eps << " element " << i;
      }
    }
  }
}

TEST(CrossEntropy, FastMatchesReference) {
  struct Shape {
    int64_t B, C;
  };
  for (Shape s : {Shape{1, 1}, Shape{1, 2}, Shape{3, 7}, Shape{64, 2}, Shape{129, 17}, Shape{33, 30522}, Shape{0, 4}})
    for (float eps : {0.0f, 0.1f}) {
      SCOPED_TRACE("B " + std::to_string(s.B) + " C " + std::to_string(s.C) + " eps " + std::to_string(eps));
      Rng rng(static_cast<uint64_t>(s.B * 1000 + s.C));
      Tensor z = random(rng, DType::f32, {s.B, s.C}, -8.0, 8.0);
      Tensor y = make(DType::i32, {s.B});
      for (int64_t b = 0; b < s.B; ++b) y.view.as<int32_t>()[b] = rng.below(static_cast<int32_t>(s.C));
      // A confident row: its loss is tiny and must stay accurate.
      if (s.B > 0 && s.C > 1) {
        z.view.as<float>()[0] = 30.0f;
        y.view.as<int32_t>()[0] = 0;
      }
      std::vector<double> grads[2], metrics[2];
      for (int i = 0; i < 2; ++i) {
        Tensor dz = make(DType::f32, {s.B, s.C}), m = make(DType::f64, {3});
        kSets[i]->cross_entropy(dz.view, m.view, z.view, y.view, eps, 1.0f / static_cast<float>(s.B > 0 ? s.B : 1));
        grads[i] = values(dz.view);
        metrics[i] = values(m.view);
      }
      // Both kernels sum C exponentials in f32, in different orders (the fast
      // one in vector lanes, and its order depends on the build's ISA): the
      // log-sum-exp may differ by ~sqrt(C) f32 roundings (random-walk error).
      const double sum_tol = 4 * 6e-8 * std::sqrt(static_cast<double>(std::max<int64_t>(s.C, 1)));
      EXPECT_LE(relative_error(grads[1], grads[0]), 1e-5);
      EXPECT_NEAR(metrics[1][0], metrics[0][0], std::max(1e-6, sum_tol) * std::max(1.0, std::fabs(metrics[0][0])));
      EXPECT_EQ(metrics[1][1], metrics[0][1]);
      EXPECT_EQ(metrics[1][2], metrics[0][2]);
      if (s.B > 0 && s.C > 1 && eps == 0.0f) {  // the confident row alone: a loss of ~e^-22 * (C - 1)
        Tensor m0 = make(DType::f64, {3}), m1 = make(DType::f64, {3});
        const TensorView z0 = z.view.rows(0, 1), y0 = y.view.rows(0, 1);
        reference_kernels().cross_entropy(TensorView{}, m0.view, z0, y0, 0.0f, 1.0f);
        fast_kernels().cross_entropy(TensorView{}, m1.view, z0, y0, 0.0f, 1.0f);
        EXPECT_GT(m0.view.as<double>()[0], 0.0);
        EXPECT_NEAR(m1.view.as<double>()[0], m0.view.as<double>()[0],
                    std::max(1e-5, sum_tol) * m0.view.as<double>()[0]);
      }
    }
}

TEST(CrossEntropy, RefusesBadCalls) {
  Tensor z = make(DType::f32, {2, 3}), y = from(DType::i32, {2}, {0, 3}), ok = from(DType::i32, {2}, {0, 2});
  Tensor dz = make(DType::f32, {2, 3}), m = make(DType::f64, {3});
  Tensor zb = make(DType::bf16, {2, 3}), m32 = make(DType::f32, {3}), dz_bad = make(DType::f32, {3, 2});
  for (const Kernels* k : kSets) {
    EXPECT_THROW(k->cross_entropy(dz.view, m.view, z.view, y.view, 0.0f, 1.0f), Error);       // label 3 of 3
    EXPECT_THROW(k->cross_entropy(dz.view, m.view, zb.view, ok.view, 0.0f, 1.0f), Error);     // bf16 logits
    EXPECT_THROW(k->cross_entropy(dz.view, m32.view, z.view, ok.view, 0.0f, 1.0f), Error);    // f32 metrics
    EXPECT_THROW(k->cross_entropy(dz_bad.view, m.view, z.view, ok.view, 0.0f, 1.0f), Error);  // shape
    EXPECT_THROW(k->cross_entropy(dz.view, m.view, z.view, ok.view, 1.5f, 1.0f), Error);      // smoothing > 1
    EXPECT_THROW(k->cross_entropy(dz.view, m.view, z.view, ok.view, 0.0f, INFINITY), Error);  // scale
  }
}

// pred [1, 2.5, -1], target [0.5, 2.5, 1]: differences [0.5, 0, -2], losses
// [0.25, 0, 4] (sum 4.25), dpred = 2 * diff / 3 = [1/3, 0, -4/3] for the mean.
TEST(MseLoss, HandComputedAndFastMatchesReference) {
  for (const Kernels* k : kSets) {
    Tensor x = from(DType::f32, {3, 1}, {1, 2.5, -1}), t = from(DType::f32, {3}, {0.5, 2.5, 1});
    Tensor d = make(DType::f32, {3, 1}), m = from(DType::f64, {3}, {1.0, 0.0, 2.0});
    k->mse_loss(d.view, m.view, x.view, t.view, 1.0f / 3.0f);
    EXPECT_EQ(values(m.view), (std::vector<double>{5.25, 0.0, 5.0})) << k->name;
    const std::vector<double> g = values(d.view);
    EXPECT_NEAR(g[0], 1.0 / 3.0, 1e-7);
    EXPECT_EQ(g[1], 0.0);
    EXPECT_NEAR(g[2], -4.0 / 3.0, 1e-7);
    Tensor bad = make(DType::f32, {3, 2});
    EXPECT_THROW(k->mse_loss(d.view, m.view, bad.view, t.view, 1.0f), Error);
  }
  Rng rng(4);
  Tensor x = random(rng, DType::f32, {1000, 1}, -5, 5), t = random(rng, DType::f32, {1000}, -5, 5);
  std::vector<double> g[2], m[2];
  for (int i = 0; i < 2; ++i) {
    Tensor d = make(DType::f32, {1000, 1}), mm = make(DType::f64, {3});
    kSets[i]->mse_loss(d.view, mm.view, x.view, t.view, 1e-3f);
    g[i] = values(d.view);
    m[i] = values(mm.view);
  }
  EXPECT_LE(relative_error(g[1], g[0]), 1e-6);
  EXPECT_NEAR(m[1][0], m[0][0], 1e-6 * m[0][0]);
}

// ---- gradient norm and clipping -------------------------------------------------------------

TEST(SumSquares, HandComputedAccumulates) {
  for (const Kernels* k : kSets) {
    Tensor x = from(DType::f32, {2}, {3, 4}), out = make(DType::f64, {1});
    k->sum_squares(out.view, x.view);
    k->sum_squares(out.view, x.view);
    EXPECT_EQ(out.view.as<double>()[0], 50.0) << k->name;
    Tensor xb = from(DType::bf16, {2, 2}, {0.5, -1.5, 2, 0}), out32 = from(DType::f32, {1}, {1.0});
    k->sum_squares(out32.view, xb.view);
    EXPECT_EQ(out32.view.as<float>()[0], 7.5f) << k->name;  // 1 + 0.25 + 2.25 + 4
    Tensor two = make(DType::f64, {2});
    EXPECT_THROW(k->sum_squares(two.view, x.view), Error);
  }
}

TEST(SumSquares, FastMatchesReference) {
  for (int64_t n : {1, 7, 16385, 1000003})
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
      Rng rng(static_cast<uint64_t>(n));
      Tensor x = random(rng, t, {n});
      double got[2];
      for (int i = 0; i < 2; ++i) {
        Tensor out = make(DType::f64, {1});
        kSets[i]->sum_squares(out.view, x.view);
        got[i] = out.view.as<double>()[0];
      }
      // Both sum exact products in double; only the order differs.
      EXPECT_NEAR(got[1], got[0], 1e-12 * got[0]) << "n " << n << " " << dname(t);
      Tensor again = make(DType::f64, {1});
      fast_kernels().sum_squares(again.view, x.view);
      EXPECT_EQ(again.view.as<double>()[0], got[1]) << "deterministic";
    }
}

TEST(Add, HandComputedEveryDtypeAndFastMatchesReference) {
  for (const Kernels* k : kSets) {
    Tensor y = from(DType::f32, {2, 2}, {1, 2, 3, 4}), x = from(DType::bf16, {2, 2}, {0.5, -2, 0, 8});
    k->add(y.view, x.view);
    EXPECT_EQ(std::vector<float>(y.view.as<float>(), y.view.as<float>() + 4), (std::vector<float>{1.5f, 0, 3, 12}))
        << k->name;
    k->add(y.view, y.view);  // the identical view: doubles
    EXPECT_EQ(y.view.as<float>()[3], 24.0f) << k->name;
    Tensor wrong = make(DType::f32, {4});
    EXPECT_THROW(k->add(y.view, wrong.view), Error) << k->name;
    Tensor i32 = make(DType::i32, {2, 2});
    EXPECT_THROW(k->add(i32.view, x.view), Error) << k->name;
  }
  for (int64_t n : {1, 7, 4097, 100003})
    for (DType ty : {DType::f32, DType::bf16, DType::f16})
      for (DType tx : {DType::f32, DType::bf16}) {
        Rng rng(static_cast<uint64_t>(n) + 17);
        const Tensor y0 = random(rng, ty, {n}), x = random(rng, tx, {n});
        Tensor a = y0, b = y0;
        reference_kernels().add(a.view, x.view);
        fast_kernels().add(b.view, x.view);
        EXPECT_EQ(std::memcmp(a.view.data, b.view.data, a.view.bytes()), 0) << n << " " << dname(ty) << dname(tx);
      }
}

TEST(ClipScale, TorchCoefficientClampedToOne) {
  for (const Kernels* k : kSets) {
    Tensor scale = make(DType::f32, {1});
    Tensor big = from(DType::f64, {1}, {4.0}), small = from(DType::f64, {1}, {0.25});
    Tensor nan = from(DType::f32, {1}, {NAN});
    k->clip_scale(scale.view, big.view, 1.0f);  // norm 2: 1 / (2 + 1e-6) in f32
    EXPECT_EQ(scale.view.as<float>()[0], 1.0f / (2.0f + 1e-6f)) << k->name;
    k->clip_scale(scale.view, small.view, 1.0f);  // norm 0.5: 1 / 0.500001 > 1, clamped
    EXPECT_EQ(scale.view.as<float>()[0], 1.0f) << k->name;
    k->clip_scale(scale.view, nan.view, 1.0f);  // torch: a NaN norm gives NaN gradients
    EXPECT_TRUE(std::isnan(scale.view.as<float>()[0])) << k->name;
    EXPECT_THROW(k->clip_scale(scale.view, big.view, 0.0f), Error);
    Tensor scale64 = make(DType::f64, {1});
    EXPECT_THROW(k->clip_scale(scale64.view, big.view, 1.0f), Error);
  }
}

// ---- AdamW -------------------------------------------------------------------------------

// torch.optim.AdamW (torch 2.15.0, CPU, float32) on the group of
// tests/ops/gen_adamw_torch.py: p0 and three steps of gradients below; w =
// elements 0..4 with weight decay, b = elements 5..7 without, as two torch
// param groups; clip_grad_norm_ before each step in the "clip" case. Printed
// by that script ("%.9g" of each float32, which round-trips); regenerate with it.
struct TorchStep {
  int step;
  float p[8], m[8], v[8];
};
const float kP0[8] = {0.5f, -1.25f, 2.0f, 0.0f, 3.5f, -0.75f, 1e-3f, -2.5f};
const float kGrads[3][8] = {
    {0.1f, -0.2f, 0.3f, -0.4f, 0.05f, 1.5f, -0.001f, 0.25f},
    {-0.3f, 0.1f, 0.02f, 0.5f, -0.6f, -1.0f, 0.002f, 0.0f},
    {0.2f, 0.0f, -0.7f, 0.1f, 0.3f, 0.4f, -0.5f, 2.0f},
};
// clang-format off
// decay: lr 0.01 betas (0.9, 0.999) eps 1e-08 weight_decay 0.01 on w, max_norm None
const TorchStep kTorchDecay[] = {
    {1,
     {0.489950001f, -1.23987496f, 1.98979998f, 0.00999999978f, 3.48965001f, -0.75999999f, 0.0109999003f, -2.50999999f},
     {0.0100000007f, -0.0200000014f, 0.0300000012f, -0.0400000028f, 0.00500000035f, 0.150000006f, -0.000100000005f, 0.0250000004f},
     {1.00000007e-05f, 4.00000026e-05f, 9.00000086e-05f, 0.000160000011f, 2.50000016e-06f, 0.0022499999f, 1.00000019e-09f, 6.2500003e-05f}},
    {2,
     {0.494842917f, -1.23708761f, 1.98242009f, 0.00837167725f, 3.49616051f, -0.761445224f, 0.00733888801f, -2.51670051f},
     {-0.0209999997f, -0.00800000038f, 0.029000001f, 0.0140000004f, -0.0555000007f, 0.0350000076f, 0.000110000015f, 0.0225000009f},
     {9.99900076e-05f, 4.99600028e-05f, 9.03100154e-05f, 0.000409840024f, 0.000362497522f, 0.00324774999f, 4.99900077e-09f, 6.24375025e-05f}},
    {3,
     {0.494605541f, -1.23490512f, 1.9859035f, 0.00614162069f, 3.49770617f, -0.763920665f, 0.0137143107f, -2.52368116f},
     {0.00110000069f, -0.00720000034f, -0.0438999981f, 0.0226000007f, -0.0199499987f, 0.0715000108f, -0.0499009974f, 0.220249996f},
     {0.00013989002f, 4.99100424e-05f, 0.000580219727f, 0.000419430173f, 0.000452135049f, 0.00340450229f, 0.000250005018f, 0.00406237505f}},
};
// no_decay_betas: lr 0.01 betas (0.8, 0.99) eps 1e-06 weight_decay 0 on w, max_norm None
const TorchStep kTorchNoDecayBetas[] = {
    {1,
     {0.490000099f, -1.24000001f, 1.99000001f, 0.00999997556f, 3.49000025f, -0.75999999f, 0.0109900106f, -2.50999999f},
     {0.0200000014f, -0.0400000028f, 0.0600000024f, -0.0800000057f, 0.0100000007f, 0.300000012f, -0.000200000009f, 0.0500000007f},
     {0.000100000005f, 0.000400000019f, 0.000900000043f, 0.00160000008f, 2.50000012e-05f, 0.022499999f, 1.00000008e-08f, 0.000624999986f}},
    {2,
     {0.495455056f, -1.23788869f, 1.98318899f, 0.00779256783f, 3.4972899f, -0.760872483f, 0.00678263977f, -2.51630116f},
     {-0.0440000035f, -0.012000002f, 0.0520000011f, 0.035999991f, -0.112000003f, 0.0400000177f, 0.000239999994f, 0.0399999991f},
     {0.00099900004f, 0.000496000051f, 0.000895000005f, 0.0040839999f, 0.00362475007f, 0.0322749987f, 4.99000059e-08f, 0.000618749997f}},
    {3,
     {0.495000213f, -1.23635876f, 1.98775744f, 0.00511513557f, 3.49885011f, -0.76303184f, 0.0138320904f, -2.52387166f},
     {0.0047999979f, -0.00960000139f, -0.0983999968f, 0.0487999916f, -0.0296000019f, 0.112000018f, -0.0998080075f, 0.432000011f},
     {0.00138901011f, 0.00049104006f, 0.00578604965f, 0.00414315984f, 0.00448850263f, 0.0335522518f, 0.0025000493f, 0.0406125635f}},
};
// clip: lr 0.001 betas (0.9, 0.999) eps 1e-08 weight_decay 0.1 on w, max_norm 1.5
//   step 1: total norm 1.61709642
//   step 2: total norm 1.30782425
//   step 3: total norm 2.2449944
const TorchStep kTorchClip[] = {
    {1,
     {0.498950005f, -1.2488749f, 1.99879992f, 0.000999999815f, 3.49865007f, -0.750999987f, 0.00199998915f, -2.50099993f},
     {0.00927587878f, -0.0185517576f, 0.0278276391f, -0.0371035151f, 0.00463793939f, 0.139138177f, -9.27587898e-05f, 0.0231896974f},
     {8.60419368e-06f, 3.44167747e-05f, 7.74377477e-05f, 0.000137667099f, 2.15104842e-06f, 0.00193594326f, 8.60419402e-10f, 5.37762062e-05f}},
    {2,
     {0.499413222f, -1.24851346f, 1.99787831f, 0.000801387476f, 3.4989903f, -0.75110954f, 0.00160667347f, -2.50166988f},
     {-0.0216517113f, -0.00669658137f, 0.0270448755f, 0.0166068394f, -0.0558258593f, 0.0252243523f, 0.000116517105f, 0.0208707284f},
     {9.85955994e-05f, 4.43823592e-05f, 7.77603127e-05f, 0.000387529435f, 0.000362148916f, 0.00293400744f, 4.85955942e-09f, 5.37224296e-05f}},
    {3,
     {0.499477953f, -1.24820566f, 1.99794173f, 0.00058052747f, 3.49894452f, -0.751291752f, 0.00224346807f, -2.50238776f},
     {-0.00612348365f, -0.00602692319f, -0.0224303063f, 0.0216276832f, -0.0301986877f, 0.0494280271f, -0.0333027765f, 0.152414218f},
     {0.000116354131f, 4.43379759e-05f, 0.00029643235f, 0.000391606212f, 0.000401965313f, 0.00300250202f, 0.000111611902f, 0.00183938141f}},
};
// clang-format on

struct TorchCase {
  const char* name;
  double lr, beta1, beta2, eps, weight_decay;
  float max_norm;  // 0: no clipping
  const TorchStep* steps;
};

// Within 1e-6 relative, or 1e-7 of the array's largest magnitude (about an
// ulp of it): m = m + (1 - beta1)(g - m) can cancel (-0.021 + 0.1 * 0.221 =
// 0.0011 in step 3), and then torch's f32 result itself is off by ulps of the
// terms, not of the result.
void expect_close(const float* got, const float* want, const char* what, const std::string& where) {
  float largest = 0.0f;
  for (int i = 0; i < 8; ++i) largest = std::max(largest, std::fabs(want[i]));
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6 * std::fabs(want[i]) + 1e-7 * largest)
        << where << " " << what << "[" << i << "]";
}

TEST(AdamW, MatchesTorchOverThreeSteps) {
  const TorchCase cases[] = {
      {"decay", 1e-2, 0.9, 0.999, 1e-8, 0.01, 0.0f, kTorchDecay},
      {"no_decay_betas", 1e-2, 0.8, 0.99, 1e-6, 0.0, 0.0f, kTorchNoDecayBetas},
      {"clip", 1e-3, 0.9, 0.999, 1e-8, 0.1, 1.5f, kTorchClip},
  };
  for (const Kernels* k : kSets)
    for (const TorchCase& c : cases) {
      Tensor p = make(DType::f32, {8}), m = make(DType::f32, {8}), v = make(DType::f32, {8});
      std::memcpy(p.view.data, kP0, sizeof kP0);
      Tensor ranges = from(DType::i64, {1, 2}, {0, 5});  // w decays, b does not
      int exact = 0;
      for (int s = 0; s < 3; ++s) {
        Tensor g = make(DType::f32, {8});
        std::memcpy(g.view.data, kGrads[s], sizeof kGrads[s]);
        Tensor scale = make(DType::f32, {1});
        if (c.max_norm > 0.0f) {
          Tensor sumsq = make(DType::f64, {1});
          k->sum_squares(sumsq.view, g.view);
          k->clip_scale(scale.view, sumsq.view, c.max_norm);
        }
        Ops::AdamWStep hp;
        hp.step = s + 1;
        hp.lr = c.lr;
        hp.beta1 = c.beta1;
        hp.beta2 = c.beta2;
        hp.eps = c.eps;
        hp.weight_decay = c.weight_decay;
        k->adamw(p.view, g.view, m.view, v.view, ranges.view, c.max_norm > 0.0f ? scale.view : TensorView{},
                 TensorView{}, hp);
        const TorchStep& want = c.steps[s];
        const std::string where = std::string(k->name) + " " + c.name + " step " + std::to_string(want.step);
        expect_close(p.view.as<float>(), want.p, "p", where);
        expect_close(m.view.as<float>(), want.m, "m", where);
        expect_close(v.view.as<float>(), want.v, "v", where);
        for (int i = 0; i < 8; ++i) exact += p.view.as<float>()[i] == want.p[i];
      }
      std::printf("  %-8s %-15s parameters bit-identical to torch: %d of 24\n", k->name, c.name, exact);
    }
}

// With a zero gradient (and zero moments) only the decay moves p: inside the
// decay ranges p * (1 - lr * wd), elsewhere p exactly.
TEST(AdamW, DecayAppliesOnlyInsideTheRanges) {
  const int64_t n = 40000;  // several chunks, so the ranges cross chunk edges
  Ops::AdamWStep hp;
  hp.step = 3;
  hp.lr = 0.01;
  hp.weight_decay = 0.5;
  struct Layout {
    const char* name;
    std::vector<double> ranges;  // flattened [R, 2]
    bool all;                    // an unset view: decay everywhere
  };
  const Layout layouts[] = {{"all", {}, true},
                            {"none", {}, false},
                            {"some", {0, 1, 5, 17000, 17000, 17001, 39999, 40000}, false}};
  for (const Kernels* k : kSets)
    for (const Layout& l : layouts) {
      Rng rng(1);
      Tensor p = random(rng, DType::f32, {n}), p0 = p;
      Tensor g = make(DType::f32, {n}), m = make(DType::f32, {n}), v = make(DType::f32, {n});
      Tensor r = from(DType::i64, {static_cast<int64_t>(l.ranges.size() / 2), 2}, l.ranges);
      k->adamw(p.view, g.view, m.view, v.view, l.all ? TensorView{} : r.view, TensorView{}, TensorView{}, hp);
      std::vector<char> decays(static_cast<size_t>(n), l.all ? 1 : 0);
      for (size_t i = 0; i + 1 < l.ranges.size(); i += 2)
        for (auto e = static_cast<int64_t>(l.ranges[i]); e < static_cast<int64_t>(l.ranges[i + 1]); ++e)
          decays[static_cast<size_t>(e)] = 1;
      for (int64_t i = 0; i < n; ++i) {
        const float before = p0.view.as<float>()[i], after = p.view.as<float>()[i];
        if (decays[static_cast<size_t>(i)])
          ASSERT_FLOAT_EQ(after, before * 0.995f) << k->name << " " << l.name << " element " << i;
        else
          ASSERT_EQ(after, before) << k->name << " " << l.name << " element " << i;
      }
    }
}

TEST(AdamW, FastMatchesReference) {
  const int64_t n = 100003;
  Rng rng(12);
  Tensor p = random(rng, DType::f32, {n}), g = random(rng, DType::f32, {n}, -0.1, 0.1);
  Tensor m = random(rng, DType::f32, {n}, -0.01, 0.01), v = random(rng, DType::f32, {n}, 0.0, 1e-4);
  Tensor ranges = from(DType::i64, {3, 2}, {10, 5000, 5000, 5001, 70000, 100003});
  Tensor scale = from(DType::f32, {1}, {0.7});
  std::vector<double> out[2][3];
  for (int i = 0; i < 2; ++i) {
    Tensor pp = p, mm = m, vv = v;
    for (int64_t step = 5; step <= 6; ++step) {
      Ops::AdamWStep hp;
      hp.step = step;
      hp.lr = 3e-4;
      hp.weight_decay = 0.01;
      kSets[i]->adamw(pp.view, g.view, mm.view, vv.view, ranges.view, scale.view, TensorView{}, hp);
    }
    out[i][0] = values(pp.view);
    out[i][1] = values(mm.view);
    out[i][2] = values(vv.view);
  }
  EXPECT_LE(relative_error(out[1][0], out[0][0]), 1e-7) << "p";
  EXPECT_LE(relative_error(out[1][1], out[0][1]), 1e-6) << "m";
  EXPECT_LE(relative_error(out[1][2], out[0][2]), 1e-6) << "v";
}

// t and lr from device memory (Ops::AdamWStep::device: what a replayed
// optimizer-step graph reads) give the bits of the same values passed on
// the host, over a changing lr; hp.step and hp.lr are then not read. Bad
// values found there are refused where the op reads them.
TEST(AdamW, StepValuesFromDeviceMemoryEqualHostValues) {
  const int64_t n = 4099;
  Rng rng(21);
  Tensor p = random(rng, DType::f32, {n}), g = random(rng, DType::f32, {n}, -0.1, 0.1);
  Tensor m = random(rng, DType::f32, {n}, -0.01, 0.01), v = random(rng, DType::f32, {n}, 0.0, 1e-4);
  Tensor ranges = from(DType::i64, {2, 2}, {10, 2000, 3000, 4099});
  for (const Kernels* k : kSets) {
    Tensor ph = p, mh = m, vh = v, pd = p, md = m, vd = v;
    Tensor per_step = make(DType::f64, {2});
    for (int64_t step = 1; step <= 4; ++step) {
      Ops::AdamWStep hp;
      hp.step = step;
      hp.lr = 1e-3 * static_cast<double>(step) / 3.0;  // warmup-like: a new lr every step
      hp.weight_decay = 0.01;
      k->adamw(ph.view, g.view, mh.view, vh.view, ranges.view, TensorView{}, TensorView{}, hp);
      per_step.view.as<double>()[Ops::AdamWStep::kDeviceStep] = static_cast<double>(step);
      per_step.view.as<double>()[Ops::AdamWStep::kDeviceLr] = hp.lr;
      Ops::AdamWStep hd = hp;
      hd.step = 99;  // not read
      hd.lr = 0.25;  // not read
      hd.device = per_step.view;
      k->adamw(pd.view, g.view, md.view, vd.view, ranges.view, TensorView{}, TensorView{}, hd);
    }
    EXPECT_EQ(values(pd.view), values(ph.view)) << k->name;
    EXPECT_EQ(values(md.view), values(mh.view)) << k->name;
    EXPECT_EQ(values(vd.view), values(vh.view)) << k->name;
    Ops::AdamWStep bad;
    bad.device = per_step.view;
    per_step.view.as<double>()[Ops::AdamWStep::kDeviceLr] = std::numeric_limits<double>::quiet_NaN();
    EXPECT_THROW(k->adamw(pd.view, g.view, md.view, vd.view, TensorView{}, TensorView{}, TensorView{}, bad), Error);
    per_step.view.as<double>()[Ops::AdamWStep::kDeviceLr] = 1e-3;
    per_step.view.as<double>()[Ops::AdamWStep::kDeviceStep] = 0;
    EXPECT_THROW(k->adamw(pd.view, g.view, md.view, vd.view, TensorView{}, TensorView{}, TensorView{}, bad), Error);
    Tensor f32_values = make(DType::f32, {2});
    bad.device = f32_values.view;
    EXPECT_THROW(k->adamw(pd.view, g.view, md.view, vd.view, TensorView{}, TensorView{}, TensorView{}, bad), Error);
  }
}

TEST(AdamW, RefusesBadCalls) {
  Tensor p = make(DType::f32, {8}), g = make(DType::f32, {8}), m = make(DType::f32, {8}), v = make(DType::f32, {8});
  Tensor g7 = make(DType::f32, {7}), gb = make(DType::bf16, {8});
  Tensor unsorted = from(DType::i64, {2, 2}, {4, 6, 0, 2}), past = from(DType::i64, {1, 2}, {4, 9});
  Tensor ranges32 = from(DType::i32, {1, 2}, {0, 2}), scale64 = make(DType::f64, {1});
  Ops::AdamWStep hp;
  hp.lr = 1e-3;
  for (const Kernels* k : kSets) {
    EXPECT_NO_THROW(k->adamw(p.view, g.view, m.view, v.view, TensorView{}, TensorView{}, TensorView{}, hp));
    EXPECT_THROW(k->adamw(p.view, g7.view, m.view, v.view, TensorView{}, TensorView{}, TensorView{}, hp), Error);
    EXPECT_THROW(k->adamw(p.view, gb.view, m.view, v.view, TensorView{}, TensorView{}, TensorView{}, hp), Error);
    EXPECT_THROW(k->adamw(p.view, g.view, m.view, m.view, TensorView{}, TensorView{}, TensorView{}, hp),
                 Error);  // v is m
    EXPECT_THROW(k->adamw(p.view, g.view, m.view, v.view, unsorted.view, TensorView{}, TensorView{}, hp), Error);
    EXPECT_THROW(k->adamw(p.view, g.view, m.view, v.view, past.view, TensorView{}, TensorView{}, hp), Error);
    EXPECT_THROW(k->adamw(p.view, g.view, m.view, v.view, ranges32.view, TensorView{}, TensorView{}, hp), Error);
    EXPECT_THROW(k->adamw(p.view, g.view, m.view, v.view, TensorView{}, scale64.view, TensorView{}, hp), Error);
    Ops::AdamWStep bad = hp;
    bad.step = 0;
    EXPECT_THROW(k->adamw(p.view, g.view, m.view, v.view, TensorView{}, TensorView{}, TensorView{}, bad), Error);
    bad = hp;
    bad.beta2 = 1.0;
    EXPECT_THROW(k->adamw(p.view, g.view, m.view, v.view, TensorView{}, TensorView{}, TensorView{}, bad), Error);
  }
}

// ---- through the backend's stream --------------------------------------------------------

// A whole optimizer step enqueued on the CPU backend: loss + metrics, gradient
// norm, clipping coefficient, AdamW, a dropout and its backward; the one
// synchronize at the end is the only host wait, and the results are those of
// the kernels called directly.
TEST(TrainOps, OneStepOnTheStreamWithOneHostSync) {
  Rng rng(30);
  Tensor z = random(rng, DType::f32, {4, 3}, -2, 2), y = from(DType::i32, {4}, {0, 1, 2, 1});
  Tensor p0 = random(rng, DType::f32, {12}), x = random(rng, DType::bf16, {4, 6});
  Tensor pred = random(rng, DType::f32, {4, 1}), target = random(rng, DType::f32, {4});
  struct Run {
    Tensor dz, metrics, sumsq, scale, p, m, v, drop, dx, mse;
  };
  auto fresh = [&] {
    Run r{make(DType::f32, {4, 3}),  make(DType::f64, {3}),   make(DType::f64, {1}),    make(DType::f32, {1}),
          p0,                        make(DType::f32, {12}),  make(DType::f32, {12}),   make(DType::bf16, {4, 6}),
          make(DType::bf16, {4, 6}), make(DType::f64, {3})};
    return r;
  };
  Ops::AdamWStep hp;
  hp.lr = 1e-2;
  hp.weight_decay = 0.1;
  Run direct = fresh();
  {
    const Kernels& k = fast_kernels();
    k.cross_entropy(direct.dz.view, direct.metrics.view, z.view, y.view, 0.1f, 0.25f);
    k.sum_squares(direct.sumsq.view, direct.dz.view);
    k.clip_scale(direct.scale.view, direct.sumsq.view, 0.05f);
    k.adamw(direct.p.view, direct.dz.view, direct.m.view, direct.v.view, TensorView{}, direct.scale.view, TensorView{},
            hp);
    k.dropout(direct.drop.view, x.view, 0.1f, 5, 6, 7, 0);
    k.dropout_backward(direct.dx.view, direct.drop.view, 0.1f, 5, 6, 7, 0);
    k.mse_loss(TensorView{}, direct.mse.view, pred.view, target.view, 1.0f);
  }
  Run queued = fresh();
  CpuBackend backend(fast_kernels());
  const Ops& ops = backend.ops();
  ops.cross_entropy(queued.dz.view, queued.metrics.view, z.view, y.view, 0.1f, 0.25f);
  ops.sum_squares(queued.sumsq.view, queued.dz.view);
  ops.clip_scale(queued.scale.view, queued.sumsq.view, 0.05f);
  ops.adamw(queued.p.view, queued.dz.view, queued.m.view, queued.v.view, TensorView{}, queued.scale.view, TensorView{},
            hp);
  ops.dropout(queued.drop.view, x.view, 0.1f, 5, 6, 7, 0);
  ops.dropout_backward(queued.dx.view, queued.drop.view, 0.1f, 5, 6, 7, 0);
  ops.mse_loss(TensorView{}, queued.mse.view, pred.view, target.view, 1.0f);
  backend.synchronize();
  EXPECT_EQ(backend.host_syncs(), 1u);
  EXPECT_EQ(bytes(queued.metrics.view), bytes(direct.metrics.view));
  EXPECT_EQ(bytes(queued.scale.view), bytes(direct.scale.view));
  EXPECT_LT(queued.scale.view.as<float>()[0], 1.0f);  // the clip did bite
  EXPECT_EQ(bytes(queued.p.view), bytes(direct.p.view));
  EXPECT_EQ(bytes(queued.drop.view), bytes(direct.drop.view));
  EXPECT_EQ(bytes(queued.dx.view), bytes(direct.dx.view));
  EXPECT_EQ(bytes(queued.mse.view), bytes(direct.mse.view));
}

}  // namespace
}  // namespace stoke::cpu
