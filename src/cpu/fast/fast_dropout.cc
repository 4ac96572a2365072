// dropout / dropout_backward: the mask is drawn by Philox4x32-10 in the layout
// of core/philox.h, a tile of 256 blocks (1024 elements) at a time, by the
// vectorised generator of fast_philox.h; the mask is then applied with the
// same f32 multiply as the reference, so the two sets agree bit for bit.
// Threads over tiles: each tile's draws depend only on its block numbers.
// row_offset moves the draws to the whole batch's flat indices; an offset
// inside a block (rows of a width not a multiple of 4) takes the slower
// path through mask_factors.
#include "core/philox.h"
#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_philox.h"
#include "cpu/fast/fast_ops.h"
#include "backend/train_checks.h"

namespace stoke::cpu::fast {

namespace {

template <class T>
inline T masked(T x, uint32_t word, float p, float scale) {
  return narrow_one<T>(to_float(x) * (philox::uniform(word) >= p ? scale : 0.0f));
}

// Elements [4 * first, 4 * (first + count)) of x into out, drawn as blocks
// base + first .. (base: the block of x[0] in the whole batch's tensor).
template <class T>
STOKE_CPU_CLONES void apply_tile(const T* x, T* out, uint64_t first, int64_t count, const MaskKey& key,
                                 uint64_t base) {
  uint32_t w[4][kPhiloxTileBlocks];
  philox_tile(base + first, count, key, w[0], w[1], w[2], w[3]);
  const T* xs = x + 4 * first;
  T* os = out + 4 * first;
  const float p = key.p, scale = key.scale;
  for (int64_t b = 0; b < count; ++b)
    for (int j = 0; j < 4; ++j) os[4 * b + j] = masked(xs[4 * b + j], w[j][b], p, scale);
}

// x[0] at a whole block (first % 4 == 0, the usual case: an offset of whole
// rows of a width that is a multiple of 4): tiles of whole blocks.
template <class T>
void dropout_aligned(const TensorView& out, const TensorView& x, int64_t n, const MaskKey& key, uint64_t seed,
                     uint64_t first) {
  const T* xp = x.as<const T>();
  T* op = out.as<T>();
  const uint64_t base = first / 4;
  const int64_t full_blocks = n / 4;
  const int64_t tiles = (full_blocks + kPhiloxTileBlocks - 1) / kPhiloxTileBlocks;
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t b = t * kPhiloxTileBlocks;
    const int64_t count = b + kPhiloxTileBlocks <= full_blocks ? kPhiloxTileBlocks : full_blocks - b;
    apply_tile(xp, op, static_cast<uint64_t>(b), count, key, base);
  }
  // The last, partial block: the first n % 4 words of block base + n / 4.
  if (n % 4) {
    uint32_t w[4];
    philox::block_bits(seed, key.step, key.tensor_id, base + static_cast<uint64_t>(full_blocks), w);
    for (int64_t i = 4 * full_blocks; i < n; ++i) op[i] = masked(xp[i], w[i & 3], key.p, key.scale);
  }
}

// x[0] inside a block: the factors of each tile of elements from
// mask_factors, which draws any range exactly as the whole tensor would.
template <class T>
STOKE_CPU_CLONES void apply_factors(const T* x, T* out, int64_t begin, int64_t count, const MaskKey& key,
                                    uint64_t first) {
  float buf[4 * kPhiloxTileBlocks + 8];
  const float* f = mask_factors(key, first + static_cast<uint64_t>(begin), count, buf);
  for (int64_t i = 0; i < count; ++i) out[begin + i] = narrow_one<T>(to_float(x[begin + i]) * f[i]);
}

template <class T>
void dropout_unaligned(const TensorView& out, const TensorView& x, int64_t n, const MaskKey& key, uint64_t first) {
  const T* xp = x.as<const T>();
  T* op = out.as<T>();
  const int64_t tile = 4 * kPhiloxTileBlocks - 4;  // + up to 6 words of partial blocks: within buf
  const int64_t tiles = (n + tile - 1) / tile;
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t begin = t * tile;
    apply_factors(xp, op, begin, std::min(tile, n - begin), key, first);
  }
}

void apply_mask(const char* op, const TensorView& out, const TensorView& x, float p, uint64_t seed,
                const Ops::DropoutStep& step_from, uint32_t tensor_id, uint64_t row_offset) {
  const DropoutRange r = check_dropout(op, out, x, p, step_from, row_offset);
  const uint32_t step = step_from.host_value();  // read now, when the op runs
  if (r.n == 0) return;
  if (p == 0.0f) {  // keep everything, times exactly 1: a copy
    convert_n(x.data, x.dtype, out.data, out.dtype, r.n);
    return;
  }
  const MaskKey key = mask_key(p, seed, step, tensor_id);
  with_act_type(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (r.first % 4 == 0)
      dropout_aligned<T>(out, x, r.n, key, seed, r.first);
    else
      dropout_unaligned<T>(out, x, r.n, key, r.first);
  });
}

}  // namespace

void dropout(const TensorView& out, const TensorView& x, float p, uint64_t seed, const Ops::DropoutStep& step,
             uint32_t tensor_id, uint64_t row_offset) {
  apply_mask("dropout", out, x, p, seed, step, tensor_id, row_offset);
}

void dropout_backward(const TensorView& dx, const TensorView& dy, float p, uint64_t seed,
                      const Ops::DropoutStep& step, uint32_t tensor_id, uint64_t row_offset) {
  apply_mask("dropout_backward", dx, dy, p, seed, step, tensor_id, row_offset);
}

}  // namespace stoke::cpu::fast
