// The residual add folded into the GEMMs (Accumulate::yes on linear and
// linear_backward's da) and the LayerNorm that then reads the sum alone
// (residual_layernorm with an empty residual), on both CPU kernel sets:
// - the reference's folded form is bit for bit its unfolded one (linear or
//   linear_backward, then add): the model's ref results do not move;
// - the fast kernels' folded form (oneDNN's sum post-op) agrees with their
//   unfolded one at the GEMM's f32 rounding;
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
