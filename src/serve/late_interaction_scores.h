// Scores between texts from their sparse and multi-vector outputs, as the
// libraries their models come from define them — so a served model ranks
// exactly as its own library would:
//
//   maxsim: Σ_i max_j q_i · d_j over the query's vectors i and the
//     document's vectors j (PyLate's colbert_scores, the ColBERT paper's
//     late interaction; the vectors are unit length).
//   bge-m3 (FlagEmbedding 1.3.5, M3Embedder.compute_score, each pair run on
//     its own so no padding enters):
//     dense   = q · p of the normalized CLS vectors;
//     sparse  = Σ over token ids in both of w_q(id) · w_p(id) (compute_lexical_matching_score);
//     colbert = maxsim / the query's vector count (colbert_score);
//     sparse+dense = (w_d dense + w_s sparse) / (w_d + w_s);
//     colbert+sparse+dense = (w_d dense + w_s sparse + w_c colbert) / (w_d + w_s + w_c),
//     weights [1, 1, 1] unless given.
// Sums in double.
#pragma once

#include <cstdint>
#include <span>

#include "model/m3_outputs.h"

namespace stoke::serve {

// query: nq x dim, doc: nd x dim, row-major. 0 when either has no vectors.
double maxsim(std::span<const float> query, std::span<const float> doc, int64_t dim);

double lexical_match(const LexicalWeights& a, const LexicalWeights& b);

struct M3Scores {
  double dense = 0, sparse = 0, colbert = 0, sparse_dense = 0, all = 0;
};
struct M3Weights {
  double dense = 1, sparse = 1, colbert = 1;
};
M3Scores m3_scores(double dense, double sparse, double colbert_maxsim, int64_t query_vectors, const M3Weights& w);

}  // namespace stoke::serve
