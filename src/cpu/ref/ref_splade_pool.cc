// splade_pool: SPLADE's log1p(relu(logits)) pooled per sequence, one element
// at a time, in double (the oracle).
#include <algorithm>
#include <cmath>

#include "backend/splade_pool_checks.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu::ref {

void splade_pool(const TensorView& out, const TensorView& logits, const TensorView& cu_seqlens,
                 const Ops::SpladePool& p) {
  const auto [R, V, B] = check_splade_pool(out, logits, cu_seqlens, p);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = std::max<int64_t>(index_at(cu_seqlens, b), p.first_row);
    const int64_t end = std::min<int64_t>(index_at(cu_seqlens, b + 1), p.first_row + R);
    for (int64_t v = 0; v < V; ++v) {
      double acc = 0.0;  // w >= 0: the identity of both the max and the sum
      for (int64_t t = first; t < end; ++t) {
        double w = std::log1p(std::max(load(logits, (t - p.first_row) * V + v), 0.0));
        if (p.log1p_count == 2) w = std::log1p(w);
        acc = p.sum ? acc + w : std::max(acc, w);
      }
      if (p.acc == Accumulate::yes) {
        const double before = load(out, b * V + v);
        acc = p.sum ? before + acc : std::max(before, acc);
      }
      store(out, b * V + v, acc);
    }
  }
}

}  // namespace stoke::cpu::ref
