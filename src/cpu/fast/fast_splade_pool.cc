// splade_pool: SPLADE's pooling of MLM logits. The max needs one log1p per
// output, not per logit: log1p and relu are non-decreasing, so
// max_t log1p(relu(x_t)) = log1p(relu(max_t x_t)) exactly (f32's log1pf
// is monotone), and the inner loop is a plain running max over the
// vocabulary row (vectorised). The sum takes log1p per logit and sums in
// double per block, rounded once. Threads over column tiles of the
// vocabulary: every sequence's rows of one tile stay in cache.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/splade_pool_checks.h"
#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_ops.h"

namespace stoke::cpu::fast {

namespace {

constexpr int64_t kTile = 512;  // vocabulary columns per task

float activate(float x, int log1p_count) {
  float w = std::log1p(std::max(x, 0.0f));
  return log1p_count == 2 ? std::log1p(w) : w;
}

STOKE_CPU_CLONES void max_rows(const float* x, int64_t rows, int64_t V, int64_t n, float* m) {
  for (int64_t i = 0; i < n; ++i) m[i] = 0.0f;  // relu: nothing below 0 counts
  for (int64_t t = 0; t < rows; ++t) {
    const float* r = x + t * V;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) m[i] = m[i] < r[i] ? r[i] : m[i];
  }
}

}  // namespace

void splade_pool(const TensorView& out, const TensorView& logits, const TensorView& cu_seqlens,
                 const Ops::SpladePool& p) {
  const SpladePoolShape shape = check_splade_pool(out, logits, cu_seqlens, p);
  const int64_t R = shape.R, V = shape.V, B = shape.B;
  if (B == 0 || V == 0) return;
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  const float* x = logits.as<const float>();
  float* o = out.as<float>();
  const int64_t tiles = (V + kTile - 1) / kTile;
  const bool accumulate = p.acc == Accumulate::yes;
#pragma omp parallel if (R * V >= kParallelMinElements && tiles > 1)
  {
    std::vector<float> m(static_cast<size_t>(kTile));
    std::vector<double> s(static_cast<size_t>(kTile));
#pragma omp for schedule(static)
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int64_t v0 = tile * kTile, n = std::min(kTile, V - v0);
      for (int64_t b = 0; b < B; ++b) {
        const int64_t first = std::max<int64_t>(cu[b], p.first_row);
        const int64_t end = std::min<int64_t>(cu[b + 1], p.first_row + R);
        const int64_t rows = std::max<int64_t>(end - first, 0);
        const float* xb = x + (first - p.first_row) * V + v0;
        float* ob = o + b * V + v0;
        if (!p.sum) {
          max_rows(xb, rows, V, n, m.data());
          for (int64_t i = 0; i < n; ++i) {
            const float w = activate(m[i], p.log1p_count);
            ob[i] = accumulate ? std::max(ob[i], w) : w;
          }
        } else {
          std::fill(s.begin(), s.begin() + n, 0.0);
          for (int64_t t = 0; t < rows; ++t)
            for (int64_t i = 0; i < n; ++i) s[static_cast<size_t>(i)] += activate(xb[t * V + i], p.log1p_count);
          for (int64_t i = 0; i < n; ++i) {
            const double before = accumulate ? static_cast<double>(ob[i]) : 0.0;
            ob[i] = static_cast<float>(before + s[static_cast<size_t>(i)]);
          }
        }
      }
    }
  }
}

}  // namespace stoke::cpu::fast
