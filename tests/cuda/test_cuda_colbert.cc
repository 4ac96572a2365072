// A PyLate ColBERT model's query and document vectors on the CUDA backend
// against PyLate 1.6.0's goldens (tests/data/colbert_tiny): f32 (the exact
// attention path, attention_keys for the queries), eagerly and through graph
// replay, all texts in one batch and one per batch, within 1e-5; maxsim's
// scores against rank.rerank's. Skipped, with the reason, where there is no GPU.
#include <gtest/gtest.h>

#include "cuda/cuda_test_support.h"
#include "model/encoder.h"
#include "support/colbert_goldens.h"

namespace stoke {
namespace {

using test::colbert::Batching;

TEST(CudaColbertGolden, EagerMatchesPylate) {
  STOKE_REQUIRE_GPU(backend);
  test::colbert::expect_vectors_match(*backend, 1e-5, Batching::together, /*graphs=*/false);
  test::colbert::expect_vectors_match(*backend, 1e-5, Batching::one_by_one, /*graphs=*/false);
}

TEST(CudaColbertGolden, GraphsMatchPylate) {
  STOKE_REQUIRE_GPU(backend);
  test::colbert::expect_vectors_match(*backend, 1e-5, Batching::together, /*graphs=*/true);
  test::colbert::expect_vectors_match(*backend, 1e-5, Batching::one_by_one, /*graphs=*/true);
}

TEST(CudaColbertGolden, MaxSimMatchesPylateRerank) {
  STOKE_REQUIRE_GPU(backend);
  test::colbert::expect_rerank_scores_match(*backend, 1e-5);
}

}  // namespace
}  // namespace stoke
