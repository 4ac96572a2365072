// MaxSim, ColBERT's late-interaction score, on a backend: what `serve
// /rerank` calls for a ColBERT model. The op (backend/op_list.h maxsim) is
// PyLate 1.6.0's scores.colbert_scores with a documents mask, per query:
//   einsum("ash,bth->abst", q, d) masked, .max(-1).values.sum(-1)
//   = sum_i max_j q_i · d_j over the document's real vectors.
// pylate.rank.rerank pads a query's documents with zero vectors and passes no
// mask, so there a shorter document's max is at least 0 (a zero row's
// product); where every query vector has a positive best match — trained
// models' normalized vectors almost always — the two are equal, and the
// goldens check they are (tests/golden/make_colbert.py). stoke scores the
// real vectors only: a document's score does not depend on the others sent
// with it. Vectors are used as given (PyLate's are normalized by encode).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"

namespace stoke {

// Scores of one query's vectors query[Tq * dim] against N documents whose
// vectors are docs[Td * dim], document n's rows offsets[n] .. offsets[n + 1]
// (offsets[N + 1]: from 0, ascending, ending at Td). One wait for the
// result. Throws Error(invalid_argument) naming what does not fit.
std::vector<float> maxsim_scores(Backend& backend, std::span<const float> query, int64_t dim,
                                 std::span<const float> docs, std::span<const int64_t> offsets);

}  // namespace stoke
