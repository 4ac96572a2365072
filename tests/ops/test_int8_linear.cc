// linear_int8 beyond the op table: the int32 sums of oneDNN's u8 x s8 GEMM
// exact against integer loops, the vector quantizer byte for byte the scalar
// contract, the 7-bit code of CPUs without VNNI (forced by a hook here; the
// ctest entry int8_without_vnni also runs this file with oneDNN limited to
// AVX512_CORE, its real non-VNNI path), and the messages that say so.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/fast/fast_ops.h"
#include "cpu/int8_rows.h"
#include "cpu/kernels.h"
#include "jobs/model_session.h"
#include "model/int8_weights.h"

namespace stoke {
namespace {

// Restores detection when a test that pretended otherwise ends.
struct PretendNoInt8Dot {
  PretendNoInt8Dot() { cpu::set_cpu_int8_dot_for_testing(false); }
  ~PretendNoInt8Dot() { cpu::set_cpu_int8_dot_for_testing(true); }
};
struct PretendNoBf16 {
  PretendNoBf16() { cpu::set_cpu_native_bf16_for_testing(false); }
  ~PretendNoBf16() { cpu::set_cpu_native_bf16_for_testing(true); }
};

bool forced_without_vnni() { return std::getenv("STOKE_TEST_EXPECT_NO_VNNI") != nullptr; }

struct Shape {
  int64_t M, N, K;
};
const Shape kShapes[] = {{1, 5, 3}, {7, 65, 129}, {33, 31, 64}, {2, 1, 1}, {16, 384, 1536}, {64, 96, 771}};

// The exact sums, at the widest codes the CPU's activation code allows: on
// VNNI any u8; without it u8 <= 127, where oneDNN's 16-bit pair sums
// (2 * 127 * 127 < 2^15) must not saturate.
TEST(Int8Gemm, SumsAreExact) {
  const cpu::Int8ActivationCode code = cpu::cpu_int8_activation_code();
  const int umax = code.levels;
  std::mt19937 gen(7);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE("M " + std::to_string(s.M) + " N " + std::to_string(s.N) + " K " + std::to_string(s.K));
    std::vector<uint8_t> a(static_cast<size_t>(s.M * s.K));
    std::vector<int8_t> w(static_cast<size_t>(s.N * s.K));
    for (auto& x : a) x = static_cast<uint8_t>(std::uniform_int_distribution<int>(0, umax)(gen));
    for (auto& x : w) x = static_cast<int8_t>(std::uniform_int_distribution<int>(-127, 127)(gen));
    // The worst case for saturation in the first row and column: all extremes.
    for (int64_t k = 0; k < s.K; ++k) {
      a[static_cast<size_t>(k)] = static_cast<uint8_t>(umax);
      w[static_cast<size_t>(k)] = 127;
    }
    std::vector<int32_t> got(static_cast<size_t>(s.M * s.N), -1);
    cpu::fast::gemm_u8s8s32(a.data(), w.data(), got.data(), s.M, s.N, s.K);
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t n = 0; n < s.N; ++n) {
        int64_t want = 0;
        for (int64_t k = 0; k < s.K; ++k) want += int64_t{a[static_cast<size_t>(m * s.K + k)]} * w[static_cast<size_t>(n * s.K + k)];
        ASSERT_EQ(got[static_cast<size_t>(m * s.N + n)], want) << "at " << m << ", " << n;
      }
  }
}

// The vector quantizer gives the scalar contract's bytes and code: odd
// lengths (masked tails), ties at .5, a zero row, one outlier, all-positive
// rows (GELU outputs), both codes.
TEST(Int8Quantize, VectorMatchesScalar) {
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (const cpu::Int8ActivationCode code : {cpu::Int8ActivationCode{255}, cpu::Int8ActivationCode{127}})
    for (int64_t K : {1, 3, 15, 16, 17, 64, 100, 771}) {
      for (int variant = 0; variant < 5; ++variant) {
        std::vector<float> x(static_cast<size_t>(K));
        for (auto& v : x) v = u(gen);
        if (variant == 1) std::fill(x.begin(), x.end(), 0.0f);
        if (variant == 2) x[static_cast<size_t>(K / 2)] = 1e6f;
        if (variant == 3)  // ties: span = levels, so x * inv = x exactly
          for (int64_t k = 0; k < K; ++k)
            x[static_cast<size_t>(k)] = k == 0 ? float(code.levels) / 2 : k == 1 ? -float(code.levels) / 2 : float(k % 7) - 2.5f;
        if (variant == 4)
          for (auto& v : x) v = std::fabs(v);
        std::vector<uint8_t> want(static_cast<size_t>(K)), got(static_cast<size_t>(K));
        const cpu::RowCode cw = cpu::quantize_row(x.data(), K, code, want.data());
        const cpu::RowCode cg = cpu::fast::quantize_row_fast(x.data(), K, code, got.data());
        EXPECT_EQ(cw.scale, cg.scale);
        EXPECT_EQ(cw.zero, cg.zero);
        EXPECT_EQ(want, got) << "K " << K << " variant " << variant << " levels " << code.levels;
        for (uint8_t q : got) EXPECT_LE(q, code.levels);
        if (variant == 1) {
          EXPECT_EQ(cg.scale, 0.0f);
        }
        if (variant == 4) {
          EXPECT_EQ(cg.zero, 0) << "an all-positive row uses every level above 0";
        }
      }
    }
}

// Per-channel weights: codes within [-127, 127], the largest of a row at
// +-127, exact row sums, a zero row with scale 0.
TEST(Int8Quantize, WeightsPerChannel) {
  const float w[] = {0.5f, -1.0f, 0.25f, 0.0f, 0.0f, 0.0f, 3.0f, 1.5f, -0.01f};
  const QuantizedWeight q = quantize_per_channel(w, 3, 3);
  EXPECT_EQ(q.q[1], -127);
  EXPECT_EQ(q.q[0], 64);  // 63.5 rounds to even
  EXPECT_FLOAT_EQ(q.meta[0], 1.0f / 127.0f);
  EXPECT_EQ(q.meta[1], 0.0f);
  EXPECT_EQ(q.q[6], 127);
  EXPECT_EQ(q.meta[3 + 0], 64.0f - 127.0f + 32.0f);
  EXPECT_EQ(q.meta[3 + 1], 0.0f);
}

// The op on both kernel sets with the CPU's code and with the 7-bit code
// forced: the fast kernel meets the reference, and both stay close to the
// f32 linear (the quantization error on Gaussian inputs, bounded loosely: 8-bit ~1%, 7-bit ~2%).
void compare_int8_to_f32(double f32_tol) {
  const int64_t M = 9, N = 70, K = 200;
  std::mt19937 gen(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> a(M * K), w(N * K), bias(N), out_ref(M * N), out_fast(M * N), out_f32(M * N);
  for (auto& v : a) v = nd(gen);
  for (auto& v : w) v = nd(gen) * 0.05f;
  for (auto& v : bias) v = nd(gen) * 0.1f;
  const QuantizedWeight q = quantize_per_channel(w.data(), N, K);
  std::vector<int8_t> wq = q.q;
  std::vector<float> meta = q.meta;
  const TensorView av(a.data(), DType::f32, {M, K}), wv(w.data(), DType::f32, {N, K}), bv(bias.data(), DType::f32, {N});
  const TensorView qv(wq.data(), DType::i8, {N, K}), mv(meta.data(), DType::f32, {2, N});
  cpu::reference_kernels().linear_int8(TensorView(out_ref.data(), DType::f32, {M, N}), av, qv, mv, bv, Activation::gelu_erf);
  cpu::fast_kernels().linear_int8(TensorView(out_fast.data(), DType::f32, {M, N}), av, qv, mv, bv, Activation::gelu_erf);
  cpu::reference_kernels().linear(TensorView(out_f32.data(), DType::f32, {M, N}), av, wv, bv, Activation::gelu_erf, Accumulate::no);
  double d_fast = 0, d_f32 = 0, n2 = 0;
  for (int64_t i = 0; i < M * N; ++i) {
    d_fast += std::pow(double(out_fast[i]) - out_ref[i], 2);
    d_f32 += std::pow(double(out_ref[i]) - out_f32[i], 2);
    n2 += std::pow(double(out_f32[i]), 2);
  }
  EXPECT_LE(std::sqrt(d_fast / n2), 1e-5) << "fast against the reference";
  EXPECT_LE(std::sqrt(d_f32 / n2), f32_tol) << "int8 against f32";
}

TEST(Int8Linear, MatchesReferenceAndF32) { compare_int8_to_f32(1.5e-2); }

TEST(Int8Linear, SevenBitCodeWithoutVnni) {
  PretendNoInt8Dot hide;
  EXPECT_FALSE(cpu::cpu_has_int8_dot());
  EXPECT_EQ(cpu::cpu_int8_activation_code().levels, 127);
  compare_int8_to_f32(3e-2);
}

// Without VNNI the user is told, in one line, that int8 is not faster here.
TEST(Int8Linear, SaysSoWithoutVnni) {
  PretendNoInt8Dot hide;
  EXPECT_EQ(std::string(cpu::cpu_int8_support()), "int8 without VNNI (7-bit activations)");
  const std::string w = precision_speed_warning(Precision::int8, "cpu");
  EXPECT_NE(w.find("no VNNI"), std::string::npos) << w;
  EXPECT_NE(w.find("not faster"), std::string::npos) << w;
  EXPECT_EQ(w.find('\n'), std::string::npos);
}

// Under ctest's int8_without_vnni entry oneDNN itself runs without VNNI; the
// detection follows it (and SumsAreExact ran the real 16-bit path).
TEST(Int8Linear, ForcedNonVnniPathIsDetected) {
  if (!forced_without_vnni()) GTEST_SKIP() << "runs under the ctest entry int8_without_vnni (ONEDNN_MAX_CPU_ISA=AVX512_CORE)";
  EXPECT_FALSE(cpu::cpu_has_int8_dot());
  EXPECT_EQ(cpu::cpu_int8_activation_code().levels, 127);
  EXPECT_FALSE(precision_speed_warning(Precision::int8, "cpu").empty());
}

// bf16 honesty: on a CPU without native bf16 the warning says slower and why;
// with it (or on a GPU) nothing is said.
TEST(Bf16Honesty, SaysSlowerWithoutNativeBf16) {
  {
    PretendNoBf16 hide;
    EXPECT_FALSE(device_has_native_bf16("cpu"));
    const std::string w = precision_speed_warning(Precision::bf16, "cpu");
    EXPECT_NE(w.find("slower than --precision f32"), std::string::npos) << w;
    EXPECT_NE(w.find("AVX512-BF16"), std::string::npos) << w;
  }
  EXPECT_EQ(precision_speed_warning(Precision::bf16, "cuda:0"), "");
  EXPECT_EQ(precision_speed_warning(Precision::f32, "cpu"), "");
  if (cpu::cpu_has_native_bf16()) {
    EXPECT_EQ(precision_speed_warning(Precision::bf16, "cpu"), "");
  }
}

}  // namespace
}  // namespace stoke
