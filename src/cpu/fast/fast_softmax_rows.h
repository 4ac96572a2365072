// The row softmax of the CPU attention kernels (fast_attention.cc,
// fast_attention_gqa.cc) over score rows laid out by the product tiles of
// fast_attention_tiles.h: whole vectors of L floats, the padding holding -inf.
// Include after fast_attention_tiles.h, under the kernel file's -Wpsabi pragma.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "cpu/fast/fast_attention_tiles.h"
#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_math.h"

namespace stoke::cpu::fast::tiles {

// Horizontal max and sum of a vector: a tree of shuffles, each folding lanes
// `width` apart onto each other (halves, quarters, ...).
template <int L, int width, size_t... I>
[[gnu::always_inline]] inline VecOf<L> fold(VecOf<L> v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, ((I & ~size_t(2 * width - 1)) | ((I + width) & size_t(2 * width - 1)))...);
}
template <int L, int width = L / 2>
[[gnu::always_inline]] inline float max_of_lanes(VecOf<L> v) {
  const VecOf<L> other = fold<L, width>(v, std::make_index_sequence<L>{});
  v = other > v ? other : v;
  if constexpr (width == 1)
    return v[0];
  else
    return max_of_lanes<L, width / 2>(v);
}
template <int L, int width = L / 2>
[[gnu::always_inline]] inline float sum_of_lanes(VecOf<L> v) {
  v += fold<L, width>(v, std::make_index_sequence<L>{});
  if constexpr (width == 1)
    return v[0];
  else
    return sum_of_lanes<L, width / 2>(v);
}

// p = exp(s - max) over each of n rows of s (Lp entries, a multiple of kPad;
// the padding holds -inf, see store_scores), in place; sums[r] = sum of row
// r's p, maxes[r] = the max subtracted. Whole vectors and tree reductions: on
// rows of a few dozen keys a scalar tail and an in-order sum of lanes cost as
// much as the exps. The lanes' sums go into a double every kSumVectors
// vectors: over a run of one token a lane's running sum of near-equal terms
// would otherwise round the same way hundreds of times. (static: each kernel
// file its own clones; target_clones on a function shared between files is
// fragile.)
constexpr int64_t kSumVectors = 8;
template <int L>
STOKE_CPU_CLONES static void softmax_rows(float* s, int64_t n, int64_t Lp, float* sums, float* maxes) {
  using Vec = VecOf<L>;
  for (int64_t r = 0; r < n; ++r) {
    float* x = s + r * Lp;
    Vec m = load_vec<L>(x);
    for (int64_t j0 = L; j0 < Lp; j0 += L) {
      const Vec v = load_vec<L>(x + j0);
      m = v > m ? v : m;
    }
    const float mx = max_of_lanes<L>(m);
    double total = 0.0;
    for (int64_t k0 = 0; k0 < Lp; k0 += kSumVectors * L) {
      Vec sum = {};
      for (int64_t j0 = k0; j0 < std::min(Lp, k0 + kSumVectors * L); j0 += L) {
        // Below e^-69 ~ 1e-30 a weight cannot matter against the maximum's 1,
        // and its products with V could be subnormal (slow microcode assists,
        // measured 3x on the whole op): make it exactly 0 (the padding's -inf
        // too).
        const Vec z = load_vec<L>(x + j0) - mx;
        const Vec e = exp_approx_lanes<Vec, typename Lanes<L>::Words>(z);
        const Vec p = z < -69.0f ? Vec{} : e;
        store_vec<L>(x + j0, p);
        sum += p;
      }
      total += static_cast<double>(sum_of_lanes<L>(sum));
    }
    sums[r] = static_cast<float>(total);
    maxes[r] = mx;
  }
}

}  // namespace stoke::cpu::fast::tiles
