// Mixed precision as the encoder uses it: a low-precision GEMM (bf16 or f16
// activations and weights, f32 bias) writing an f32 output, fast vs reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "cpu/kernels.h"

namespace stoke {
namespace {

template <class Low>
std::vector<Low> narrow(const std::vector<float>& v) {
  std::vector<Low> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<Low, bf16>)
      out[i] = to_bf16(v[i]);
    else
      out[i] = to_f16(v[i]);
  }
  return out;
}

template <class Low>
void check_low_precision_gemm_to_f32(DType low) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (auto [M, N, K] : {std::tuple{1, 7, 3}, std::tuple{65, 64, 63}, std::tuple{128, 96, 768}}) {
    std::vector<float> a(static_cast<size_t>(M * K)), w(static_cast<size_t>(N * K)), b(static_cast<size_t>(N));
    for (auto* v : {&a, &w, &b})
      for (auto& x : *v) x = dist(rng);
    auto a_low = narrow<Low>(a), w_low = narrow<Low>(w);
    std::vector<float> fast(static_cast<size_t>(M * N)), ref(static_cast<size_t>(M * N));
    const TensorView av(a_low.data(), low, {M, K}), wv(w_low.data(), low, {N, K}), bv(b.data(), DType::f32, {N});
    for (Activation act : {Activation::none, Activation::gelu_erf}) {
      cpu::fast_kernels().linear(TensorView(fast.data(), DType::f32, {M, N}), av, wv, bv, act, Accumulate::no);
      cpu::reference_kernels().linear(TensorView(ref.data(), DType::f32, {M, N}), av, wv, bv, act, Accumulate::no);
      double num = 0, den = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        num += (fast[i] - ref[i]) * (fast[i] - ref[i]);
        den += ref[i] * ref[i];
      }
      // Same low-precision inputs on both sides, f32 accumulation: only the
      // summation order differs, so the f32 bound applies (K-scaled).
      EXPECT_LE(std::sqrt(num / den), 16 * std::ldexp(1.0, -24) * std::sqrt(static_cast<double>(K)) + 1e-6)
          << M << "x" << N << "x" << K;
    }
  }
}

TEST(OpsMixedPrecision, Bf16GemmWritesF32) { check_low_precision_gemm_to_f32<bf16>(DType::bf16); }
TEST(OpsMixedPrecision, F16GemmWritesF32) { check_low_precision_gemm_to_f32<f16>(DType::f16); }

TEST(OpsMixedPrecision, OtherOutputDtypesAreRefused) {
  std::vector<bf16> a(4), w(4);
  std::vector<f16> out(4);
  EXPECT_THROW(cpu::fast_kernels().linear(TensorView(out.data(), DType::f16, {2, 2}),
                                          TensorView(a.data(), DType::bf16, {2, 2}),
                                          TensorView(w.data(), DType::bf16, {2, 2}), TensorView(), Activation::none, Accumulate::no),
               std::exception);
}

}  // namespace
}  // namespace stoke
