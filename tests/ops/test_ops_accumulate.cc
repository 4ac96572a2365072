// The residual add folded into the GEMMs (Accumulate::yes on linear and
// linear_backward's da) and into layernorm_backward's dx (the pre-norm
// backward's adds), and the LayerNorm that then reads the sum alone
// (residual_layernorm with an empty residual), on both CPU kernel sets:
// - the reference's folded form is bit for bit its unfolded one (linear,
//   linear_backward or layernorm_backward, then add): the model's ref
//   results do not move;
// - the fast kernels' folded GEMMs (oneDNN's sum post-op) agree with their
//   unfolded ones at the GEMM's f32 rounding; their folded LayerNorm
//   backward is their unfolded one bit for bit (the same f32 ds, one add);
// - what the contract leaves out (a low-precision destination, an
//   activation) is refused by name.
// The op table (test_op_table) runs the same forms on every backend against
// the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "cpu/kernels.h"
#include "support/host_tensors.h"

namespace stoke {
namespace {

using cpu::Kernels;
using test::host_tensors::get;
using test::host_tensors::HostTensor;
using test::host_tensors::host_tensor;
using test::host_tensors::random_tensor;
using test::host_tensors::relative_error;
using test::host_tensors::Rng;
using test::host_tensors::set;

const DType kActs[] = {DType::f32, DType::bf16, DType::f16};

HostTensor from(DType t, std::vector<int64_t> shape, const std::vector<double>& v) {
  HostTensor x = host_tensor(t, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) set(x.view, static_cast<int64_t>(i), v[i]);
  return x;
}

std::vector<double> values(const TensorView& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(get(t, i));
  return v;
}

// f32 of K products at unit scale: 16 u sqrt(K), as the op table's tolerance.
double f32_tolerance(int64_t K) { return std::max(1e-6, 16.0 * 0x1.0p-24 * std::sqrt(static_cast<double>(K))); }

class Accumulating : public ::testing::TestWithParam<const Kernels*> {
 protected:
  const Kernels& k() const { return *GetParam(); }
  bool is_reference() const { return GetParam() == &cpu::reference_kernels(); }
};

TEST_P(Accumulating, LinearAddsIntoOutHandComputed) {
  // a = [[1, 2], [3, 4]], w = [[1, 0], [0, 1], [1, 1]], bias = [0.5, -1, 0]: the
  // product + bias is [[1.5, 1, 3], [3.5, 3, 7]]; out starts at [[10, 20, 30], [40, 50, 60]].
  for (DType t : kActs) {
    HostTensor a = from(t, {2, 2}, {1, 2, 3, 4}), w = from(t, {3, 2}, {1, 0, 0, 1, 1, 1});
    HostTensor b = from(DType::f32, {3}, {0.5, -1, 0}), out = from(DType::f32, {2, 3}, {10, 20, 30, 40, 50, 60});
    k().linear(out.view, a.view, w.view, b.view, Activation::none, Accumulate::yes);
    EXPECT_EQ(values(out.view), (std::vector<double>{11.5, 21, 33, 43.5, 53, 67})) << dtype_name(t);
  }
  // K = 0: no products, out += bias.
  HostTensor a = host_tensor(DType::f32, {2, 0}), w = host_tensor(DType::f32, {3, 0});
  HostTensor b = from(DType::f32, {3}, {0.5, -1, 0}), out = from(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  k().linear(out.view, a.view, w.view, b.view, Activation::none, Accumulate::yes);
  EXPECT_EQ(values(out.view), (std::vector<double>{1.5, 1, 3, 4.5, 4, 6}));
}

TEST_P(Accumulating, LinearIsTheUnfoldedLinearThenAdd) {
  Rng rng(2024);
  for (DType t : kActs)
    for (bool bias : {false, true}) {
      const int64_t M = 37, N = 65, K = 129;
      const HostTensor a = random_tensor(rng, t, {M, K}), w = random_tensor(rng, t, {N, K}, -0.1, 0.1);
      const HostTensor b = random_tensor(rng, DType::f32, {N}), residual = random_tensor(rng, DType::f32, {M, N});
      HostTensor folded = residual, branch = host_tensor(DType::f32, {M, N}), unfolded = residual;
      const TensorView bv = bias ? b.view : TensorView{};
      k().linear(folded.view, a.view, w.view, bv, Activation::none, Accumulate::yes);
      k().linear(branch.view, a.view, w.view, bv, Activation::none, Accumulate::no);
      k().add(unfolded.view, branch.view);
      if (is_reference())  // the product rounded to f32, then the f32 add: the same bits
        EXPECT_EQ(values(folded.view), values(unfolded.view)) << dtype_name(t) << " bias " << bias;
      else  // oneDNN may add out in before its last K block
        EXPECT_LE(relative_error(folded.view, unfolded.view), f32_tolerance(K)) << dtype_name(t) << " bias " << bias;
    }
}

TEST_P(Accumulating, LinearBackwardAddsIntoDaOnly) {
  Rng rng(7);
  for (DType t : kActs) {
    const int64_t M = 29, N = 70, K = 33;
    const HostTensor a = random_tensor(rng, t, {M, K}), w = random_tensor(rng, t, {N, K}, -0.2, 0.2);
    const HostTensor dy = random_tensor(rng, t, {M, N}), residual = random_tensor(rng, DType::f32, {M, K});
    const HostTensor dw0 = random_tensor(rng, DType::f32, {N, K}), db0 = random_tensor(rng, DType::f32, {N});
    HostTensor da_folded = residual, dw_folded = dw0, db_folded = db0;
    HostTensor da_branch = host_tensor(DType::f32, {M, K}), dw = dw0, db = db0, da_unfolded = residual;
    k().linear_backward(da_folded.view, dw_folded.view, db_folded.view, dy.view, a.view, w.view, Accumulate::yes);
    k().linear_backward(da_branch.view, dw.view, db.view, dy.view, a.view, w.view, Accumulate::no);
    k().add(da_unfolded.view, da_branch.view);
    if (is_reference())
      EXPECT_EQ(values(da_folded.view), values(da_unfolded.view)) << dtype_name(t);
    else
      EXPECT_LE(relative_error(da_folded.view, da_unfolded.view), f32_tolerance(N)) << dtype_name(t);
    // The parameter gradients are the same computation either way.
    EXPECT_EQ(values(dw_folded.view), values(dw.view)) << dtype_name(t);
    EXPECT_EQ(values(db_folded.view), values(db.view)) << dtype_name(t);
  }
}

TEST_P(Accumulating, RefusesWhatTheContractLeavesOut) {
  HostTensor a = host_tensor(DType::bf16, {2, 3}), w = host_tensor(DType::bf16, {4, 3});
  HostTensor out_low = host_tensor(DType::bf16, {2, 4}), out = host_tensor(DType::f32, {2, 4});
  EXPECT_THROW(k().linear(out_low.view, a.view, w.view, TensorView{}, Activation::none, Accumulate::yes), Error);
  EXPECT_THROW(k().linear(out.view, a.view, w.view, TensorView{}, Activation::gelu_erf, Accumulate::yes), Error);
  EXPECT_NO_THROW(k().linear(out.view, a.view, w.view, TensorView{}, Activation::none, Accumulate::yes));
  // A bias inside out would be read after the GEMM wrote over it.
  const TensorView bias_in_out(out.view.data, DType::f32, {4});
  HostTensor af = host_tensor(DType::f32, {2, 3}), wf = host_tensor(DType::f32, {4, 3});
  EXPECT_THROW(k().linear(out.view, af.view, wf.view, bias_in_out, Activation::none, Accumulate::yes), Error);
  HostTensor dy = host_tensor(DType::bf16, {2, 4}), da_low = host_tensor(DType::bf16, {2, 3});
  EXPECT_THROW(k().linear_backward(da_low.view, TensorView{}, TensorView{}, dy.view, a.view, w.view, Accumulate::yes),
               Error);
  HostTensor da = host_tensor(DType::f32, {2, 3});
  EXPECT_NO_THROW(k().linear_backward(da.view, TensorView{}, TensorView{}, dy.view, a.view, w.view, Accumulate::yes));
}

// A LayerNorm backward whose every step is exact: rows s = [-3, -1, 1, 3]
// (the second as x + residual), mean 0 and rstd 1 given as the saved
// statistics, gamma 1, dy = [1, 0, 0, 0]. Then g = dy, mean(g) = 1/4,
// mean(g s_hat) = -3/4, ds = dy - 1/4 + 3/4 s_hat = [-1.5, -1, 0.5, 2].
TEST_P(Accumulating, LayerNormBackwardAddsIntoDxHandComputed) {
  for (DType t : kActs) {
    const HostTensor x = from(t, {2, 4}, {-3, -1, 1, 3, -1, -1, 1, 1});
    const HostTensor residual = from(t, {2, 4}, {0, 0, 0, 0, -2, 0, 0, 2});
    const HostTensor dy = from(t, {2, 4}, {1, 0, 0, 0, 1, 0, 0, 0}), gamma = from(t, {4}, {1, 1, 1, 1});
    const HostTensor mean = from(DType::f32, {2}, {0, 0}), rstd = from(DType::f32, {2}, {1, 1});
    HostTensor dx = from(DType::f32, {2, 4}, {10, 20, 30, 40, 50, 60, 70, 80});
    HostTensor dgamma = from(DType::f32, {4}, {1, 1, 1, 1}), dbeta = from(DType::f32, {4}, {0, 0, 0, 0});
    k().layernorm_backward(dx.view, dgamma.view, dbeta.view, dy.view, x.view, residual.view, mean.view, rstd.view,
                           gamma.view, Accumulate::yes);
    EXPECT_EQ(values(dx.view), (std::vector<double>{8.5, 19, 30.5, 42, 48.5, 59, 70.5, 82})) << dtype_name(t);
    EXPECT_EQ(values(dgamma.view), (std::vector<double>{-5, 1, 1, 1})) << dtype_name(t);  // += sum dy s_hat
    EXPECT_EQ(values(dbeta.view), (std::vector<double>{2, 0, 0, 0})) << dtype_name(t);    // += sum dy
  }
}

TEST_P(Accumulating, LayerNormBackwardIsTheUnfoldedBackwardThenAdd) {
  Rng rng(11);
  for (DType t : kActs)
    for (bool with_residual : {false, true})
      for (int64_t H : {1, 7, 70, 300, 1100}) {
        const int64_t T = 19;
        const HostTensor x = random_tensor(rng, t, {T, H}, -2, 3), res = random_tensor(rng, t, {T, H});
        const HostTensor zeros = host_tensor(t, {T, H}), dy = random_tensor(rng, t, {T, H});
        const HostTensor gamma = random_tensor(rng, t, {H}, 0.5, 1.5), beta = random_tensor(rng, t, {H});
        HostTensor y = host_tensor(t, {T, H}), mean = host_tensor(DType::f32, {T}), rstd = host_tensor(DType::f32, {T});
        k().residual_layernorm_train(y.view, mean.view, rstd.view, x.view, with_residual ? res.view : zeros.view,
                                     gamma.view, beta.view, 1e-5f);
        const TensorView rv = with_residual ? res.view : TensorView{};
        const HostTensor dx0 = random_tensor(rng, DType::f32, {T, H}, -2, 2);
        const HostTensor dg0 = random_tensor(rng, DType::f32, {H}), db0 = random_tensor(rng, DType::f32, {H});
        HostTensor folded = dx0, dg_folded = dg0, db_folded = db0;
        HostTensor branch = host_tensor(DType::f32, {T, H}), unfolded = dx0, dg = dg0, db = db0;
        k().layernorm_backward(folded.view, dg_folded.view, db_folded.view, dy.view, x.view, rv, mean.view, rstd.view,
                               gamma.view, Accumulate::yes);
        k().layernorm_backward(branch.view, dg.view, db.view, dy.view, x.view, rv, mean.view, rstd.view, gamma.view,
                               Accumulate::no);
        k().add(unfolded.view, branch.view);
        const std::string what = std::string(dtype_name(t)) + " H " + std::to_string(H) + " residual " +
                                 std::to_string(with_residual);
        EXPECT_EQ(values(folded.view), values(unfolded.view)) << what;
        EXPECT_EQ(values(dg_folded.view), values(dg.view)) << what;
        EXPECT_EQ(values(db_folded.view), values(db.view)) << what;
      }
}

TEST_P(Accumulating, LayerNormBackwardRefusesWhatTheContractLeavesOut) {
  HostTensor x = host_tensor(DType::bf16, {2, 4}), dy = host_tensor(DType::bf16, {2, 4});
  HostTensor gamma = host_tensor(DType::bf16, {4}), mean = host_tensor(DType::f32, {2}), rstd = host_tensor(DType::f32, {2});
  HostTensor dx_low = host_tensor(DType::bf16, {2, 4}), dx = host_tensor(DType::f32, {2, 4});
  auto call = [&](const TensorView& d, const TensorView& g) {
    k().layernorm_backward(d, TensorView{}, TensorView{}, g, x.view, TensorView{}, mean.view, rstd.view, gamma.view,
                           Accumulate::yes);
  };
  EXPECT_THROW(call(dx_low.view, dy.view), Error);  // only an f32 dx accumulates
  EXPECT_NO_THROW(call(dx.view, dy.view));
  // dx may be dy when writing, not when adding (nor overlapping it).
  HostTensor both = host_tensor(DType::f32, {3, 4});
  const TensorView top(both.view.data, DType::f32, {2, 4});
  const TensorView shifted(static_cast<float*>(both.view.data) + 4, DType::f32, {2, 4});
  EXPECT_THROW(call(top, top), Error);
  EXPECT_THROW(call(top, shifted), Error);
  EXPECT_NO_THROW(k().layernorm_backward(top, TensorView{}, TensorView{}, top, x.view, TensorView{}, mean.view,
                                         rstd.view, gamma.view, Accumulate::no));
}

// After an accumulating linear the residual stream holds the sum: the
// LayerNorm reads it alone, exactly as it would read x + a zero residual.
TEST_P(Accumulating, LayerNormWithoutResidualIsLayerNormOfX) {
  Rng rng(31);
  for (DType t : kActs) {
    const HostTensor x = random_tensor(rng, t, {6, 70}, -2, 3), zeros = host_tensor(t, {6, 70});
    const HostTensor g = random_tensor(rng, DType::f32, {70}, 0.5, 1.5), b = random_tensor(rng, DType::f32, {70});
    HostTensor alone = host_tensor(t, {6, 70}), with_zeros = host_tensor(t, {6, 70});
    HostTensor low = host_tensor(DType::bf16, {6, 70}), low_zeros = host_tensor(DType::bf16, {6, 70});
    const bool copy = t == DType::f32;  // the second, compute-dtype copy the encoder asks of an f32 stream
    k().residual_layernorm(alone.view, x.view, TensorView{}, g.view, b.view, 1e-5f, copy ? low.view : TensorView{});
    k().residual_layernorm(with_zeros.view, x.view, zeros.view, g.view, b.view, 1e-5f,
                           copy ? low_zeros.view : TensorView{});
    EXPECT_EQ(values(alone.view), values(with_zeros.view)) << dtype_name(t);
    EXPECT_EQ(values(low.view), values(low_zeros.view)) << dtype_name(t);
    HostTensor in_place = x;  // out may be x itself
    k().residual_layernorm(in_place.view, in_place.view, TensorView{}, g.view, b.view, 1e-5f, TensorView{});
    EXPECT_EQ(values(in_place.view), values(alone.view)) << dtype_name(t);
  }
  // The training form keeps its residual required (its backward reads both).
  HostTensor x = host_tensor(DType::f32, {2, 4}), out = host_tensor(DType::f32, {2, 4});
  HostTensor mean = host_tensor(DType::f32, {2}), rstd = host_tensor(DType::f32, {2}), g = host_tensor(DType::f32, {4});
  EXPECT_THROW(k().residual_layernorm_train(out.view, mean.view, rstd.view, x.view, TensorView{}, g.view, g.view, 1e-5f),
               Error);
}

INSTANTIATE_TEST_SUITE_P(Kernels, Accumulating, ::testing::Values(&cpu::reference_kernels(), &cpu::fast_kernels()),
                         [](const auto& info) {
                           return info.param == &cpu::reference_kernels() ? std::string("ref") : std::string("fast");
                         });

}  // namespace
}  // namespace stoke
