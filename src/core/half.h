// bfloat16 and IEEE half as storage types: conversion to and from float with
// round-to-nearest-even, as PyTorch and oneDNN do. Arithmetic is always in float.
#pragma once

#include <cstdint>
#include <cstring>

namespace stoke {

struct bf16 {
  uint16_t bits = 0;
};
struct f16 {
  uint16_t bits = 0;
};

inline float to_float(float x) { return x; }

inline float to_float(bf16 x) {
  const uint32_t u = static_cast<uint32_t>(x.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bf16 to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return bf16{static_cast<uint16_t>((u >> 16) | 0x40)};  // NaN stays NaN
  u += 0x7FFF + ((u >> 16) & 1);  // round to nearest, ties to even
  return bf16{static_cast<uint16_t>(u >> 16)};
}

inline float to_float(f16 x) {
  const uint32_t sign = static_cast<uint32_t>(x.bits & 0x8000) << 16;
  uint32_t exp = (x.bits >> 10) & 0x1F, mant = x.bits & 0x3FF, u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      u = sign | (exp << 23) | ((mant & 0x3FF) << 13);
    }
  } else if (exp == 0x1F) {
    u = sign | 0x7F800000 | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline f16 to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const uint32_t abs = u & 0x7FFFFFFF;
  if (abs > 0x7F800000) return f16{static_cast<uint16_t>(sign | 0x7E00)};  // NaN
  if (abs >= 0x477FF000) return f16{static_cast<uint16_t>(sign | 0x7C00)};  // overflow -> inf
  if (abs < 0x38800000) {  // subnormal or zero in half
    if (abs < 0x33000000) return f16{sign};
    const uint32_t e = abs >> 23, m = (abs & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - e;  // 14 - (e - 127) + 13 - 1 ... total shift to 10-bit mantissa
    uint32_t half_m = m >> (shift);
    const uint32_t rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_m & 1))) ++half_m;
    return f16{static_cast<uint16_t>(sign | half_m)};
  }
  uint32_t r = abs + 0xFFF + ((abs >> 13) & 1);  // round to nearest even at bit 13
  r -= (127 - 15) << 23;
  return f16{static_cast<uint16_t>(sign | (r >> 13))};
}

}  // namespace stoke
