// Branch-free float exp and GELU that the compiler can vectorise (libm's
// expf/erff are calls it cannot). Accuracy is stated per function and checked
// against the reference kernels (double, libm) in tests/ops.
#pragma once

#include <cstdint>
#include <cstring>

namespace stoke::cpu::fast {

// e^x, relative error below 2e-7 (Cephes expf: x = n ln2 + r with |r| <= ln2/2
// split in two constants, degree-6 polynomial for e^r, 2^n put into the
// exponent bits). x is clamped to [-87, 88], so e^-1000 gives ~1.6e-38, not 0,
// which is harmless where it is used (softmax numerators, erfc tails); NaN
// stays NaN. F is float or a GCC vector of floats (lane by lane), U the
// unsigned 32-bit integer type of the same shape.
template <class F, class U>
inline F exp_approx_lanes(F x) {
  const F lo = F{} - 87.0f, hi = F{} + 88.0f;
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  // n = round(x / ln2): adding 1.5 * 2^23 leaves n in the low mantissa bits.
  const F shifted = x * 1.44269504088896341f + 12582912.0f;
  const F n = shifted - 12582912.0f;
  U n_bits;  // n as a two's complement int
  std::memcpy(&n_bits, &shifted, sizeof(U));
  n_bits -= 0x4B400000u;
  const F r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const U scale_bits = (n_bits + 127u) << 23;  // n in [-126, 127]: a normal 2^n
  F scale;
  std::memcpy(&scale, &scale_bits, sizeof(F));
  return p * scale;
}
inline float exp_approx(float x) { return exp_approx_lanes<float, uint32_t>(x); }

// GELU, erf form: 0.5 x (1 + erf(x / sqrt 2)). erfc(z) for z = |x|/sqrt 2 from
// Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7, the approximation PyTorch's
// vectorised erf uses); for x < 0 the result is 0.5 x erfc(z), computed
// directly instead of as 1 - erf, so there is no cancellation.
inline float gelu_erf_approx(float x) {
  const float z = (x < 0.0f ? -x : x) * 0.70710678118654752f;
  const float t = 1.0f / (1.0f + 0.3275911f * z);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float erfc_z = p * t * exp_approx(-z * z);
  return x < 0.0f ? 0.5f * x * erfc_z : x - 0.5f * x * erfc_z;
}

// GELU_erf'(u) = Phi(u) + u phi(u). Phi from the same erfc approximation as
// gelu_erf_approx (A&S 7.1.26, |error| <= 1.5e-7 / 2 on Phi), sharing its
// exp(-u^2/2) with phi(u) = exp(-u^2/2) / sqrt(2 pi).
inline float gelu_erf_grad_approx(float u) {
  const float z = (u < 0.0f ? -u : u) * 0.70710678118654752f;
  const float t = 1.0f / (1.0f + 0.3275911f * z);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float e = exp_approx(-z * z);
  const float half_erfc = 0.5f * p * t * e;
  const float Phi = u < 0.0f ? half_erfc : 1.0f - half_erfc;
  return Phi + u * 0.39894228040143268f * e;
}

}  // namespace stoke::cpu::fast
