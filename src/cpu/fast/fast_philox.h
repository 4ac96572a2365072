// Philox4x32-10 for the fast kernels: the words of many consecutive blocks at
// once, in the layout of core/philox.h (the dropout op and the attention
// probabilities' dropout draw through here).
//
// The generator runs structure-of-arrays (one lane per block, the four output
// words in four arrays) so the compiler can vectorise the ten rounds across
// blocks (32x32->64 multiplies are vpmuludq). The helpers are always inlined
// into their callers, which are STOKE_CPU_CLONES leaf functions, so each ISA
// clone gets its own vector code.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/philox.h"

namespace stoke::cpu::fast {

inline constexpr int64_t kPhiloxTileBlocks = 256;  // 1024 elements: 4 KiB of words on the stack

struct MaskKey {
  uint32_t k0, k1;  // seed low, seed high
  uint32_t tensor_id, step;
  float p, scale;  // keep iff uniform >= p; kept values times scale = f32(1 / (1 - p)), 0 when p = 1
};

inline MaskKey mask_key(float p, uint64_t seed, uint32_t step, uint32_t tensor_id) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), tensor_id, step, p,
          p < 1.0f ? 1.0f / (1.0f - p) : 0.0f};
}

// The words of blocks [first, first + count) into w0..w3 (count <= kPhiloxTileBlocks).
__attribute__((always_inline)) inline void philox_tile(uint64_t first, int64_t count, const MaskKey& key,
                                                       uint32_t* w0, uint32_t* w1, uint32_t* w2, uint32_t* w3) {
  const uint32_t tid = key.tensor_id, step = key.step, k0_in = key.k0, k1_in = key.k1;
  const uint32_t hi = static_cast<uint32_t>(first >> 32), lo_first = static_cast<uint32_t>(first);
  for (int64_t b = 0; b < count; ++b) {
    // The low counter word may wrap inside a tile; the high word then steps.
    const uint32_t lo = lo_first + static_cast<uint32_t>(b);
    uint32_t c0 = lo, c1 = hi + (lo < lo_first ? 1u : 0u), c2 = tid, c3 = step;
    uint32_t k0 = k0_in, k1 = k1_in;
    for (int r = 0; r < 10; ++r) {
      const uint64_t p0 = static_cast<uint64_t>(philox::kMul0) * c0;
      const uint64_t p1 = static_cast<uint64_t>(philox::kMul1) * c2;
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
      c1 = static_cast<uint32_t>(p1);
      c3 = static_cast<uint32_t>(p0);
      c0 = n0;
      c2 = n2;
      k0 += philox::kWeyl0;  // one bump too many after the last round: unused
      k1 += philox::kWeyl1;
    }
    w0[b] = c0;
    w1[b] = c1;
    w2[b] = c2;
    w3[b] = c3;
  }
}

// The mask factors (key.scale if kept, else 0) of flat elements [first,
// first + n): written for the whole 4-element blocks that cover the range into
// buf (room for n + 6 floats), and returned as a pointer f into buf with f[i]
// the factor of element first + i. Elements are drawn by their flat index
// alone: a range that starts or ends inside a block uses that block's words
// exactly as a draw over the whole tensor would. (Whole blocks keep the
// store loop contiguous, so it vectorises.)
__attribute__((always_inline)) inline const float* mask_factors(const MaskKey& key, uint64_t first, int64_t n,
                                                                float* buf) {
  if (n <= 0) return buf;
  const uint64_t b0 = first >> 2, last = (first + static_cast<uint64_t>(n) - 1) >> 2;
  const float p = key.p, scale = key.scale;
  uint32_t w[4][kPhiloxTileBlocks];
  for (uint64_t b = b0; b <= last; b += kPhiloxTileBlocks) {
    const int64_t count = static_cast<int64_t>(std::min<uint64_t>(kPhiloxTileBlocks, last - b + 1));
    philox_tile(b, count, key, w[0], w[1], w[2], w[3]);
    float* f = buf + 4 * (b - b0);
    for (int64_t k = 0; k < count; ++k)
      for (int j = 0; j < 4; ++j) f[4 * k + j] = philox::uniform(w[j][k]) >= p ? scale : 0.0f;
  }
  return buf + (first & 3);
}

}  // namespace stoke::cpu::fast
