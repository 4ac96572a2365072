#include "serve/late_interaction_scores.h"

#include <algorithm>
#include <limits>

namespace stoke::serve {

double maxsim(std::span<const float> query, std::span<const float> doc, int64_t dim) {
  const auto D = static_cast<size_t>(dim);
  const size_t nq = query.size() / D, nd = doc.size() / D;
  if (nq == 0 || nd == 0) return 0;
  double total = 0;
  for (size_t i = 0; i < nq; ++i) {
    const float* q = query.data() + i * D;
    double best = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < nd; ++j) {
      const float* d = doc.data() + j * D;
      double dot = 0;
      for (size_t k = 0; k < D; ++k) dot += static_cast<double>(q[k]) * d[k];
      best = std::max(best, dot);
    }
    total += best;
  }
  return total;
}

double lexical_match(const LexicalWeights& a, const LexicalWeights& b) {
  // Both id lists ascend: one merge.
  double total = 0;
  size_t i = 0, j = 0;
  while (i < a.ids.size() && j < b.ids.size()) {
    if (a.ids[i] < b.ids[j]) {
      ++i;
    } else if (b.ids[j] < a.ids[i]) {
      ++j;
    } else {
      total += static_cast<double>(a.weights[i++]) * b.weights[j++];
    }
  }
  return total;
}

M3Scores m3_scores(double dense, double sparse, double colbert_maxsim, int64_t query_vectors, const M3Weights& w) {
  M3Scores s;
  s.dense = dense;
  s.sparse = sparse;
  s.colbert = query_vectors > 0 ? colbert_maxsim / static_cast<double>(query_vectors) : 0;
  s.sparse_dense = (w.dense * s.dense + w.sparse * s.sparse) / (w.dense + w.sparse);
  s.all = (w.dense * s.dense + w.sparse * s.sparse + w.colbert * s.colbert) / (w.dense + w.sparse + w.colbert);
  return s;
}

}  // namespace stoke::serve
