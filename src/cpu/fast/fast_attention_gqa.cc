// Grouped-query attention (Qwen2 / Qwen3), causal or not, over packed qkv
// [T, (heads + 2*kv_heads)*d].
//
// Work items are (sequence, k/v head, range of up to kQueryBlock queries),
// spread over the threads dynamically. An item widens its k/v head's keys
// into K^T [d, Lp] and values into V [Lp, dp] once — only the keys its
// queries can see: with the causal mask, those up to its last query — and
// serves every query head of the group from them. Per query head, queries go
// kRows at a time through the tiles of fast_attention_tiles.h:
//   S = (Q / sqrt(d)) K^T      over the keys the block's last query sees,
//                              later keys of earlier rows set to -inf
//   P = exp(S - rowmax S)      (fast_softmax_rows.h)
//   O = P V / rowsum
// so a thread holds K and V of one head (O(L d)) and kRows rows of scores,
// never an L x L matrix: an 8k-token context costs 8k x d floats per thread,
// not 8k^2 per head. Only the sequence's own tokens are read, so a text's
// result does not depend on the batch around it.
#pragma GCC diagnostic ignored "-Wpsabi"  // as in fast_attention.cc: vectors never cross a call

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/fast/fast_attention_tiles.h"
#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_ops.h"
#include "cpu/fast/fast_softmax_rows.h"
#include "backend/decoder_checks.h"

namespace stoke::cpu::fast {

namespace {

// Queries per item: K/V are widened once per item and serve its queries of
// every head of the group; 128 still splits a long sequence between threads.
constexpr int64_t kQueryBlock = 128;

using namespace tiles;  // NOLINT: the attention kernels' own toolkit

struct Item {
  int64_t first, len, kv_head, i0, i1;  // sequence rows [first, first + len), queries [i0, i1)
};

struct Geometry {
  int64_t C, heads, kv_heads, d;
  float scale;  // 1 / sqrt(d)
  bool causal;
};

struct Scratch {
  std::vector<float> kt, v, q, s, o;
  Scratch(int64_t longest, int64_t d) {
    const int64_t Lp = round_up(std::max<int64_t>(longest, 1), kPad), dp = round_up(d, kPad);
    kt.resize(static_cast<size_t>(d * Lp));
    v.resize(static_cast<size_t>(Lp * dp));
    q.resize(static_cast<size_t>(round_up(kQueryBlock, kRows) * d));
    s.resize(static_cast<size_t>(kRows * Lp));
    o.resize(static_cast<size_t>(kRows * dp));
  }
};

template <int L, class T>
STOKE_CPU_CLONES void attend_group(const T* qkv, T* out, const Item& it, const Geometry& g, Scratch& w) {
  const int64_t d = g.d, C = g.C, dp = round_up(d, kPad);
  const int64_t keys = g.causal ? it.i1 : it.len;  // the keys any query of the item sees
  const int64_t Lp = round_up(keys, kPad);
  const T* rows = qkv + it.first * C;
  const int64_t k_col = (g.heads + it.kv_head) * d, v_col = (g.heads + g.kv_heads + it.kv_head) * d;
  float* kt = w.kt.data();
  float* v = w.v.data();
  for (int64_t j = 0; j < keys; ++j) {
    const T* vj = rows + j * C + v_col;
    for (int64_t c = 0; c < d; ++c) v[j * dp + c] = to_float(vj[c]);
    for (int64_t c = d; c < dp; ++c) v[j * dp + c] = 0.0f;
  }
  widen_transposed<L>(rows + k_col, C, keys, d, Lp, kt);

  const int64_t group = g.heads / g.kv_heads, n_all = it.i1 - it.i0;
  float* qs = w.q.data();
  float* s = w.s.data();
  float* o = w.o.data();
  float sums[kRows], maxes[kRows];
  for (int64_t hq = it.kv_head * group; hq < (it.kv_head + 1) * group; ++hq) {
    for (int64_t r = 0; r < n_all; ++r) {
      const T* qr = rows + (it.i0 + r) * C + hq * d;
      for (int64_t c = 0; c < d; ++c) qs[r * d + c] = to_float(qr[c]) * g.scale;
    }
    std::fill(qs + n_all * d, qs + round_up(n_all, kRows) * d, 0.0f);  // the last block's padding rows
    for (int64_t r0 = 0; r0 < n_all; r0 += kRows) {
      const int64_t n = std::min(kRows, n_all - r0);
      const int64_t kend = g.causal ? it.i0 + r0 + n : it.len;  // keys of this block's last query
      const int64_t Lb = round_up(kend, kPad);
      product_rows<L>(qs + r0 * d, d, kt, Lp, d, Lb, kend, s, Lb);  // S = Q K^T, keys from kend on -inf
      if (g.causal)
        for (int64_t r = 0; r < n; ++r)
          std::fill(s + r * Lb + it.i0 + r0 + r + 1, s + r * Lb + kend, -__builtin_inff());
      softmax_rows<L>(s, n, Lb, sums, maxes);
      product_rows<L>(s, Lb, v, dp, kend, dp, dp, o, dp);  // O = P V (unnormalised)
      for (int64_t r = 0; r < n; ++r) {
        const float inv = 1.0f / sums[r];
        T* orow = out + (it.first + it.i0 + r0 + r) * g.heads * d + hq * d;
        for (int64_t c = 0; c < d; ++c) orow[c] = narrow_one<T>(o[r * dp + c] * inv);
      }
    }
  }
}

}  // namespace

void attention_gqa(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                   int kv_heads, bool causal, int max_seqlen) {
  const GqaShape shape = check_attention_gqa(out, qkv, cu_seqlens, heads, kv_heads, max_seqlen);
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  std::vector<Item> items;
  int64_t longest = 0;
  double work = 0.0;  // multiply-adds of the whole call (an upper bound when causal)
  for (int64_t b = 0; b < shape.B; ++b) {
    const int64_t first = cu[b], len = cu[b + 1] - cu[b];
    longest = std::max(longest, len);
    work += 2.0 * static_cast<double>(len) * static_cast<double>(len) * static_cast<double>(shape.d * shape.heads);
    for (int64_t g = 0; g < shape.kv_heads; ++g)
      for (int64_t i0 = 0; i0 < len; i0 += kQueryBlock)
        items.push_back({first, len, g, i0, std::min(len, i0 + kQueryBlock)});
  }
  if (items.empty() || shape.d == 0) return;
  const Geometry g{qkv.dim(1), shape.heads, shape.kv_heads, shape.d,
                   static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.d))), causal};
  const int64_t n_items = static_cast<int64_t>(items.size());
  const bool parallel = n_items > 1 && work >= static_cast<double>(kParallelMinElements) * 16;
  auto run = [&](auto lanes, auto tag) {
    constexpr int L = decltype(lanes)::value;
    using T = decltype(tag);
    const T* src = qkv.as<const T>();
    T* dst = out.as<T>();
#pragma omp parallel if (parallel)
    {
      Scratch scratch(longest, g.d);
#pragma omp for schedule(dynamic)
      for (int64_t n = 0; n < n_items; ++n) attend_group<L, T>(src, dst, items[static_cast<size_t>(n)], g, scratch);
    }
  };
  with_act_type(qkv.dtype, [&](auto tag) { with_vector_floats([&](auto lanes) { run(lanes, tag); }); });
}

}  // namespace stoke::cpu::fast
