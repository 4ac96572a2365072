// Pieces the attention kernels share (fast_attention.cc's forward and
// backward, fast_attention_gqa.cc): generic vectors of L floats (16 with AVX-512,
// 8 elsewhere: attention_vector_floats), register-blocked product tiles,
// in-register L x L transposes and widening loads. Every helper is inlined
// into the kernels' per-ISA clones; include this header first in a kernel
// file, after its -Wpsabi pragma (see fast_attention.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/half.h"

namespace stoke::cpu::fast::tiles {

constexpr int64_t kRows = 8;  // 8 independent FMA chains: enough to hide FMA latency on 2 ports
constexpr int64_t kPad = 16;  // keys and head dims are zero-padded to a multiple of this (of every L)

inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// The compiler's generic vector types (not ISA intrinsics) for L floats: each
// clone lowers them to its own instructions. Left to itself the
// auto-vectoriser vectorised these loops across query rows instead, 10x slower.
template <int L>
struct Lanes {
  typedef float Vec __attribute__((vector_size(L * sizeof(float))));
  typedef uint16_t Halves __attribute__((vector_size(L * sizeof(uint16_t))));
  typedef uint32_t Words __attribute__((vector_size(L * sizeof(uint32_t))));
  // Vectors per tile row: 2 x 16 (16 zmm accumulators of 32), 1 x 8 (8 ymm
  // accumulators of AVX2's 16).
  static constexpr int kW = L == 16 ? 2 : 1;
};

template <int L>
using VecOf = typename Lanes<L>::Vec;

template <int L>
[[gnu::always_inline]] inline VecOf<L> load_vec(const float* p) {
  VecOf<L> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <int L>
[[gnu::always_inline]] inline void store_vec(float* p, VecOf<L> v) {
  std::memcpy(p, &v, sizeof(v));
}

// One kRows x (kW * L) tile of a product acc[r][:] = sum over i < n of
// a[r * a_stride + i] * b[i * b_stride + :] — the broadcast operand a, the
// vector one b, i running over the reduced dimension. The forward's
// S = Q K^T and O = P V are such products, and the backward's DP = dO V^T and
// dQ = DS K. With L = 16, kW = 2 makes each step 2 vector loads and 8
// broadcasts for 16 FMAs, so the FMAs rather than the loads set the pace;
// kW = 1 covers an odd last vector.
template <int L, int kW>
[[gnu::always_inline]] inline void product_tile(const float* a, int64_t a_stride, const float* b, int64_t b_stride,
                                                int64_t n, VecOf<L> (&acc)[kRows][kW]) {
  for (int64_t r = 0; r < kRows; ++r)
    for (int w = 0; w < kW; ++w) acc[r][w] = VecOf<L>{};
  for (int64_t i = 0; i < n; ++i) {
    VecOf<L> x[kW];
    for (int w = 0; w < kW; ++w) x[w] = load_vec<L>(b + i * b_stride + w * L);
#pragma GCC unroll 8
    for (int64_t r = 0; r < kRows; ++r) {
      const float ar = a[r * a_stride + i];
      for (int w = 0; w < kW; ++w) acc[r][w] += ar * x[w];
    }
  }
}

template <int L, size_t... I>
[[gnu::always_inline]] inline VecOf<L> lane_numbers(std::index_sequence<I...>) {
  return VecOf<L>{static_cast<float>(I)...};
}

// Stores a tile at columns j0 on, rows Lp apart. Columns from len on (keys
// past a sequence's end, the padding of the last block) get -inf, so a
// softmax may run over whole vectors: they neither win the max nor add to the
// sum (their exp is exactly 0). A len past the last column masks nothing.
template <int L, int kW>
[[gnu::always_inline]] inline void store_scores(VecOf<L> (&acc)[kRows][kW], int64_t j0, int64_t Lp, int64_t len,
                                                float* s) {
  for (int w = 0; w < kW; ++w) {
    const int64_t first = j0 + w * L;
    if (first + L > len) {
      const auto real = lane_numbers<L>(std::make_index_sequence<L>{}) < static_cast<float>(len - first);
      const VecOf<L> minus_inf = VecOf<L>{} - __builtin_inff();
      for (int64_t r = 0; r < kRows; ++r) acc[r][w] = real ? acc[r][w] : minus_inf;
    }
    for (int64_t r = 0; r < kRows; ++r) store_vec<L>(s + r * Lp + first, acc[r][w]);
  }
}

// out[r][0:cols] = sum over i < n of a[r][i] * b[i][0:cols] for kRows rows (a
// row-major with a_stride, b with b_stride, out with out_stride), cols a
// multiple of kPad, in whole tiles; columns from mask_from on get -inf (see
// store_scores; pass cols to mask nothing).
template <int L>
[[gnu::always_inline]] inline void product_rows(const float* a, int64_t a_stride, const float* b, int64_t b_stride,
                                                int64_t n, int64_t cols, int64_t mask_from, float* out,
                                                int64_t out_stride) {
  constexpr int kW = Lanes<L>::kW;
  int64_t j0 = 0;
  for (; j0 + kW * L <= cols; j0 += kW * L) {
    VecOf<L> acc[kRows][kW];
    product_tile<L, kW>(a, a_stride, b + j0, b_stride, n, acc);
    store_scores<L, kW>(acc, j0, out_stride, mask_from, out);
  }
  for (; j0 < cols; j0 += L) {
    VecOf<L> acc[kRows][1];
    product_tile<L, 1>(a, a_stride, b + j0, b_stride, n, acc);
    store_scores<L, 1>(acc, j0, out_stride, mask_from, out);
  }
}

// As product_rows without masking (cols a multiple of kPad), the reduction
// over i cut into chunks of `chunk`: each chunk's tile is added into out (the
// first one stored). A long sum of near-equal terms — P V over a run of one
// token — then rounds like `chunk` terms and n / chunk partial sums, where
// one running sum's roundings would line up over all n (1,500 keys: 200 u;
// tests/ops "activations of trained models"). One load, add and store of the
// output tile per chunk: a few percent of the product's FMAs at 64.
// One column tile (w vectors wide, at column j0) of product_rows_chunked.
template <int L, int w>
[[gnu::always_inline]] inline void product_tile_chunked(const float* a, int64_t a_stride, const float* b,
                                                        int64_t b_stride, int64_t n, int64_t j0, float* out,
                                                        int64_t out_stride, int64_t chunk) {
  VecOf<L> acc[kRows][w];
  product_tile<L, w>(a, a_stride, b + j0, b_stride, std::min(chunk, n), acc);
  for (int v = 0; v < w; ++v)
    for (int64_t r = 0; r < kRows; ++r) store_vec<L>(out + r * out_stride + j0 + v * L, acc[r][v]);
  for (int64_t c0 = chunk; c0 < n; c0 += chunk) {
    product_tile<L, w>(a + c0, a_stride, b + c0 * b_stride + j0, b_stride, std::min(chunk, n - c0), acc);
    for (int v = 0; v < w; ++v)
      for (int64_t r = 0; r < kRows; ++r) {
        float* p = out + r * out_stride + j0 + v * L;
        store_vec<L>(p, load_vec<L>(p) + acc[r][v]);
      }
  }
}

template <int L>
[[gnu::always_inline]] inline void product_rows_chunked(const float* a, int64_t a_stride, const float* b,
                                                        int64_t b_stride, int64_t n, int64_t cols, float* out,
                                                        int64_t out_stride, int64_t chunk) {
  constexpr int kW = Lanes<L>::kW;
  int64_t j0 = 0;
  for (; j0 + kW * L <= cols; j0 += kW * L)
    product_tile_chunked<L, kW>(a, a_stride, b, b_stride, n, j0, out, out_stride, chunk);
  for (; j0 < cols; j0 += L) product_tile_chunked<L, 1>(a, a_stride, b, b_stride, n, j0, out, out_stride, chunk);
}

// One round of the in-register L x L transpose: rows a and b, s apart, swap
// their off-diagonal s x s sub-blocks (a keeps its lanes with bit s clear and
// takes b's; b the other way round).
template <int L, int s, size_t... I>
[[gnu::always_inline]] inline void swap_blocks(VecOf<L>& a, VecOf<L>& b, std::index_sequence<I...>) {
  const VecOf<L> lo = __builtin_shufflevector(a, b, ((I & s) == 0 ? int(I) : int(L + I - s))...);
  const VecOf<L> hi = __builtin_shufflevector(a, b, ((I & s) == 0 ? int(I + s) : int(L + I))...);
  a = lo;
  b = hi;
}

template <int L, int s>
[[gnu::always_inline]] inline void swap_round(VecOf<L>* r) {
#pragma GCC unroll 16
  for (int i = 0; i < L; ++i)
    if ((i & s) == 0) swap_blocks<L, s>(r[i], r[i + s], std::make_index_sequence<L>{});
}

// r[i][j] becomes r[j][i]: log2(L) rounds of L two-source shuffles (64 for
// L = 16) instead of L * L scalar loads and strided stores.
template <int L>
[[gnu::always_inline]] inline void transpose(VecOf<L>* r) {
  if constexpr (L == 16) swap_round<L, 8>(r);
  swap_round<L, 4>(r);
  swap_round<L, 2>(r);
  swap_round<L, 1>(r);
}

// L values of T from p, widened, built in registers: a vector load for f32, a
// zero-extension and shift for bf16 (its bits are the f32's top half).
// (Filling a float[L] on the stack and loading it as one vector stalls on
// store forwarding — it was a fifth of the op.) Results go through references:
// GCC checks a call returning a vector where a template is instantiated.
template <int L>
[[gnu::always_inline]] inline void widen_full(const float* p, VecOf<L>& v) {
  v = load_vec<L>(p);
}
template <int L>
[[gnu::always_inline]] inline void widen_full(const bf16* p, VecOf<L>& v) {
  typename Lanes<L>::Halves h;
  std::memcpy(&h, p, sizeof(h));
  const auto w = __builtin_convertvector(h, typename Lanes<L>::Words) << 16;
  std::memcpy(&v, &w, sizeof(v));
}
template <int L>
[[gnu::always_inline]] inline void widen_full(const f16* p, VecOf<L>& v) {
  for (int i = 0; i < L; ++i) v[i] = to_float(p[i]);
}

// n (<= L) values of T from p, widened, zero beyond n.
template <int L, class T>
[[gnu::always_inline]] inline void load_widened(const T* p, int64_t n, VecOf<L>& v) {
  if (n == L) {
    widen_full<L>(p, v);
    return;
  }
  v = VecOf<L>{};
  for (int64_t i = 0; i < n; ++i) v[i] = to_float(p[i]);
}

// K^T [d, Lp] (or V^T) of one head: rows[j][0:d] for j < len (rows C
// apart), transposed and widened, zero beyond the sequence; blocks of L keys x
// L dims, each transposed in registers.
template <int L, class T>
[[gnu::always_inline]] inline void widen_transposed(const T* rows, int64_t C, int64_t len, int64_t d, int64_t Lp,
                                                    float* out) {
  for (int64_t j0 = 0; j0 < Lp; j0 += L)
    for (int64_t c0 = 0; c0 < d; c0 += L) {
      const int64_t nc = std::min<int64_t>(L, d - c0);
      VecOf<L> r[L];
      for (int64_t jj = 0; jj < L; ++jj) {
        if (j0 + jj < len)
          load_widened<L>(rows + (j0 + jj) * C + c0, nc, r[jj]);
        else
          r[jj] = VecOf<L>{};
      }
      transpose<L>(r);
      for (int64_t cc = 0; cc < nc; ++cc) store_vec<L>(out + (c0 + cc) * Lp + j0, r[cc]);
    }
}

// 16 where the CPU has AVX-512 (its clones run), else 8; a test may force
// either (set_attention_vector_floats_for_testing).
int attention_vector_floats();

// Calls f(std::integral_constant<int, L>{}) with L = attention_vector_floats().
template <class F>
void with_vector_floats(F&& f) {
  if (attention_vector_floats() == 16)
    f(std::integral_constant<int, 16>{});
  else
    f(std::integral_constant<int, 8>{});
}

}  // namespace stoke::cpu::fast::tiles
