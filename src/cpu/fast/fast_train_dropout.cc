// dropout / dropout_backward: the mask is drawn by Philox4x32-10 in the layout
// of core/philox.h, a tile of 256 blocks (1024 elements) at a time, by the
// vectorised generator of fast_philox.h; the mask is then applied with the
// same f32 multiply as the reference, so the two sets agree bit for bit.
// Threads over tiles: each tile's draws depend only on its block numbers.
#include "core/philox.h"
#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_philox.h"
#include "cpu/fast/fast_ops.h"
#include "cpu/ref/train_checks.h"

namespace stoke::cpu::fast {

namespace {

template <class T>
inline T masked(T x, uint32_t word, float p, float scale) {
  return narrow_one<T>(to_float(x) * (philox::uniform(word) >= p ? scale : 0.0f));
}

// Elements [4 * first, 4 * (first + count)) of x into out.
template <class T>
STOKE_CPU_CLONES void apply_tile(const T* x, T* out, uint64_t first, int64_t count, const MaskKey& key) {
  uint32_t w[4][kPhiloxTileBlocks];
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
  const int64_t tiles = (full_blocks + kPhiloxTileBlocks - 1) / kPhiloxTileBlocks;
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t first = t * kPhiloxTileBlocks;
    const int64_t count = first + kPhiloxTileBlocks <= full_blocks ? kPhiloxTileBlocks : full_blocks - first;
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
  const MaskKey key = mask_key(p, seed, step, tensor_id);
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
