// Variable-length self-attention, one (sequence, head, query) at a time:
// softmax(q·k^T / sqrt(d)) · v over the query's own sequence, no mask
// (bidirectional), max subtracted before exp.
#include <algorithm>
#include <vector>

#include "cpu/ref/op_checks.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu::ref {

void attention(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads, int max_seqlen) {
  const auto [T, B, nh, d] = check_attention(out, qkv, cu_seqlens, heads, max_seqlen);
  const int64_t C = 3 * nh * d;  // qkv row: [q heads | k heads | v heads]
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> x(static_cast<size_t>(T * C));  // qkv widened once
  for (int64_t i = 0; i < T * C; ++i) x[static_cast<size_t>(i)] = load(qkv, i);
  std::vector<double> p;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = index_at(cu_seqlens, b), len = index_at(cu_seqlens, b + 1) - first;
    p.assign(static_cast<size_t>(len), 0.0);
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t qc = h * d, kc = nh * d + h * d, vc = 2 * nh * d + h * d;
      for (int64_t i = 0; i < len; ++i) {
        const int64_t qrow = (first + i) * C;
        double mx = -INFINITY;
        for (int64_t j = 0; j < len; ++j) {
          const int64_t krow = (first + j) * C;
          double s = 0.0;
          for (int64_t c = 0; c < d; ++c)
            s += x[static_cast<size_t>(qrow + qc + c)] * x[static_cast<size_t>(krow + kc + c)];
          p[static_cast<size_t>(j)] = s * scale;
          mx = std::max(mx, s * scale);
        }
        double sum = 0.0;
        for (int64_t j = 0; j < len; ++j) {
          p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx);
          sum += p[static_cast<size_t>(j)];
        }
        for (int64_t c = 0; c < d; ++c) {
          double o = 0.0;
          for (int64_t j = 0; j < len; ++j)
            o += p[static_cast<size_t>(j)] * x[static_cast<size_t>((first + j) * C + vc + c)];
          store(out, (first + i) * nh * d + h * d + c, o / sum);
        }
      }
    }
  }
}

}  // namespace stoke::cpu::ref
