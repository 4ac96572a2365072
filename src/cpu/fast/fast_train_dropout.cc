// dropout / dropout_backward: the mask is drawn by Philox4x32-10 in the layout
// of core/philox.h, a tile of 256 blocks (1024 elements) at a time. The
// generator runs structure-of-arrays (one lane per block, the four output
// words in four arrays) so the compiler can vectorise the ten rounds across
// blocks (32x32->64 multiplies are vpmuludq); the mask is then applied with
// the same f32 multiply as the reference, so the two sets agree bit for bit.
// Threads over tiles: each tile's draws depend only on its block numbers.
#include "core/philox.h"
#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_train.h"
#include "cpu/ref/train_checks.h"

namespace stoke::cpu::fast {

namespace {

constexpr int64_t kTileBlocks = 256;  // 1024 elements: 4 KiB of words on the stack

struct MaskKey {
  uint32_t k0, k1;  // seed low, seed high
  uint32_t tensor_id, step;
  float p, scale;
};

// The words of blocks [first, first + count) into w0..w3 (count <= kTileBlocks).
STOKE_CPU_CLONES void philox_tile(uint64_t first, int64_t count, const MaskKey& key, uint32_t* w0, uint32_t* w1,
                                  uint32_t* w2, uint32_t* w3) {
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

template <class T>
inline T masked(T x, uint32_t word, float p, float scale) {
  return narrow_one<T>(to_float(x) * (philox::uniform(word) >= p ? scale : 0.0f));
}

// Elements [4 * first, 4 * (first + count)) of x into out.
template <class T>
STOKE_CPU_CLONES void apply_tile(const T* x, T* out, uint64_t first, int64_t count, const MaskKey& key) {
  uint32_t w[4][kTileBlocks];
  philox_tile(first, count, key, w[0], w[1], w[2], w[3]);
  const T* xs = x + 4 * first;
  T* os = out + 4 * first;
  const float p = key.p, scale = key.scale;
  for (int64_t b = 0; b < count; ++b)
    for (int j = 0; j < 4; ++j) os[4 * b + j] = masked(xs[4 * b + j], w[j][b], p, scale);
}

template <class T>
void dropout_t(const TensorView& out, const TensorView& x, int64_t n, const MaskKey& key, uint64_t seed) {
  const T* xp = x.as<const T>();
  T* op = out.as<T>();
  const int64_t full_blocks = n / 4;
  const int64_t tiles = (full_blocks + kTileBlocks - 1) / kTileBlocks;
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t first = t * kTileBlocks;
    const int64_t count = first + kTileBlocks <= full_blocks ? kTileBlocks : full_blocks - first;
    apply_tile(xp, op, static_cast<uint64_t>(first), count, key);
  }
  // The last, partial block: the first n % 4 words of block n / 4.
  if (n % 4) {
    uint32_t w[4];
    philox::block_bits(seed, key.step, key.tensor_id, static_cast<uint64_t>(full_blocks), w);
    for (int64_t i = 4 * full_blocks; i < n; ++i) op[i] = masked(xp[i], w[i & 3], key.p, key.scale);
  }
}

void apply_mask(const char* op, const TensorView& out, const TensorView& x, float p, uint64_t seed, uint32_t step,
                uint32_t tensor_id) {
  const int64_t n = check_dropout(op, out, x, p);
  if (n == 0) return;
  if (p == 0.0f) {  // keep everything, times exactly 1: a copy
    convert_n(x.data, x.dtype, out.data, out.dtype, n);
    return;
  }
  const MaskKey key{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), tensor_id, step, p,
                    p < 1.0f ? 1.0f / (1.0f - p) : 0.0f};
  with_act_type(x.dtype, [&](auto tag) { dropout_t<decltype(tag)>(out, x, n, key, seed); });
}

}  // namespace

void dropout(const TensorView& out, const TensorView& x, float p, uint64_t seed, uint32_t step, uint32_t tensor_id) {
  apply_mask("dropout", out, x, p, seed, step, tensor_id);
}

void dropout_backward(const TensorView& dx, const TensorView& dy, float p, uint64_t seed, uint32_t step,
                      uint32_t tensor_id) {
  apply_mask("dropout_backward", dx, dy, p, seed, step, tensor_id);
}

}  // namespace stoke::cpu::fast
