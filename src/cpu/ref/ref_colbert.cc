// Reference kernels of the ColBERT ops: attention_keys (attention whose keys
// are each sequence's first key_lens[b] tokens; every token a query) and
// maxsim (sum over query vectors of the best dot product with a document's
// vectors). Plain loops in double, as every reference kernel.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/colbert_checks.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu::ref {

void attention_keys(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens,
                    const TensorView& key_lens, int heads, int max_seqlen, int window) {
  const auto [T, B, nh, d] = check_attention_keys(out, qkv, cu_seqlens, key_lens, heads, max_seqlen, window);
  const int64_t C = 3 * nh * d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> p;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t first = index_at(cu_seqlens, b), len = index_at(cu_seqlens, b + 1) - first;
    const int64_t keys = index_at(key_lens, b);
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t qc = h * d, kc = nh * d + h * d, vc = 2 * nh * d + h * d;
      for (int64_t i = 0; i < len; ++i) {
        // The keys query i sees: j < keys, and |i - j| <= window with a window.
        const int64_t lo = window ? std::max<int64_t>(0, i - window) : 0;
        const int64_t hi = window ? std::min<int64_t>(keys, i + window + 1) : keys;
        p.assign(static_cast<size_t>(std::max<int64_t>(hi - lo, 0)), 0.0);
        double mx = -INFINITY;
        for (int64_t j = lo; j < hi; ++j) {
          double s = 0.0;
          for (int64_t c = 0; c < d; ++c) s += load(qkv, (first + i) * C + qc + c) * load(qkv, (first + j) * C + kc + c);
          p[static_cast<size_t>(j - lo)] = s * scale;
          mx = std::max(mx, s * scale);
        }
        double sum = 0.0;
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (int64_t c = 0; c < d; ++c) {
          double o = 0.0;
          for (int64_t j = lo; j < hi; ++j) o += p[static_cast<size_t>(j - lo)] * load(qkv, (first + j) * C + vc + c);
          store(out, (first + i) * nh * d + h * d + c, o / sum);
        }
      }
    }
  }
}

void maxsim(const TensorView& scores, const TensorView& q, const TensorView& docs, const TensorView& offsets) {
  const auto [Tq, Td, D, N] = check_maxsim(scores, q, docs, offsets);
  (void)Td;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t first = index_at(offsets, n), end = index_at(offsets, n + 1);
    double total = 0.0;
    if (end > first)
      for (int64_t i = 0; i < Tq; ++i) {
        double best = -INFINITY;
        for (int64_t j = first; j < end; ++j) {
          double s = 0.0;
          for (int64_t c = 0; c < D; ++c) s += load(q, i * D + c) * load(docs, j * D + c);
          best = std::max(best, s);
        }
        total += best;
      }
    store(scores, n, total);
  }
}

}  // namespace stoke::cpu::ref
