// Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3",
// SC 2011; the Random123 generator that cuRAND and PyTorch's CUDA dropout
// also use): a counter-based RNG. A draw is a pure function of a 128-bit
// counter and a 64-bit key, so any element's random bits can be computed on
// its own, in any order, on any device, and a resumed run draws exactly what
// an uninterrupted one would have drawn.
//
// Everything here is inline, branch-free integer arithmetic on plain arrays
// (no std containers, no globals), so a CUDA kernel can include this header
// and run the same code: STOKE_HOST_DEVICE marks the functions for nvcc.
//
// THE LAYOUT (shared by every backend; changing it changes every dropout mask,
// so it is fixed here once and checked by tests/unit/test_philox.cc):
//   key     = (seed & 0xffffffff, seed >> 32)
//   counter = (block & 0xffffffff, block >> 32, tensor_id, step)
//             where block = element_index / 4
//   output  = 4 uint32 words; word j belongs to element 4 * block + j
//   uniform = (word >> 8) * 2^-24, a float in [0, 1) with 24 random bits,
//             exactly representable, so every device computes the same float
// element_index is the flat row-major index into the tensor the mask covers
// — the whole batch's: a call on a slice of rows adds the rows before it
// (the ops' row_offset), so data-parallel ranks draw one process's masks;
// tensor_id names the tensor (each dropout site of the model has its own);
// step is the micro-step that draws (every forward that uses masks gets its
// own number, so gradient-accumulation micro-batches differ from each other).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define STOKE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define STOKE_HOST_DEVICE inline
#endif

namespace stoke::philox {

inline constexpr uint32_t kMul0 = 0xD2511F53u;   // multiplier of counter word 0
inline constexpr uint32_t kMul1 = 0xCD9E8D57u;   // multiplier of counter word 2
inline constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // key bump, golden ratio
inline constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // key bump, sqrt(3) - 1

// One Philox4x32 round on c[4] with key (k0, k1), in place.
STOKE_HOST_DEVICE void round4x32(uint32_t c[4], uint32_t k0, uint32_t k1) {
  const uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0];
  const uint64_t p1 = static_cast<uint64_t>(kMul1) * c[2];
  const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  c[0] = hi1 ^ c[1] ^ k0;
  c[1] = lo1;
  c[2] = hi0 ^ c[3] ^ k1;
  c[3] = lo0;
}

// Philox4x32 with 10 rounds: out[4] = philox(counter[4], key[2]). out may be
// counter. The key is bumped by the Weyl constants between rounds (9 bumps).
STOKE_HOST_DEVICE void philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c[4] = {counter[0], counter[1], counter[2], counter[3]};
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    round4x32(c, k0, k1);
  }
  out[0] = c[0];
  out[1] = c[1];
  out[2] = c[2];
  out[3] = c[3];
}

// The 4 words of block `block` (elements 4*block .. 4*block+3) under THE
// LAYOUT above.
STOKE_HOST_DEVICE void block_bits(uint64_t seed, uint32_t step, uint32_t tensor_id, uint64_t block, uint32_t out[4]) {
  const uint32_t counter[4] = {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), tensor_id, step};
  const uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  philox4x32_10(counter, key, out);
}

// A word's uniform float in [0, 1): its top 24 bits times 2^-24 (exact).
STOKE_HOST_DEVICE float uniform(uint32_t word) { return static_cast<float>(word >> 8) * 0x1.0p-24f; }

// The uniform float of one element (one Philox call per element: for tests
// and reference code; kernels compute whole blocks).
STOKE_HOST_DEVICE float element_uniform(uint64_t seed, uint32_t step, uint32_t tensor_id, uint64_t index) {
  uint32_t w[4];
  block_bits(seed, step, tensor_id, index >> 2, w);
  return uniform(w[index & 3]);
}

// Host convenience: uniforms of elements [first, first + n) into out[n].
void fill_uniform(uint64_t seed, uint32_t step, uint32_t tensor_id, uint64_t first, int64_t n, float* out);

}  // namespace stoke::philox
