// bge-m3's dense, sparse and ColBERT outputs on the CUDA backend against
// FlagEmbedding's goldens (tests/data/bge_m3_tiny), eagerly and through graph
// replay (the heads are part of the captured forward), all texts in one batch
// and one per batch: the same f32 bounds as on the CPU (1e-5). Skipped, with
// the reason, where there is no GPU.
#include <gtest/gtest.h>

#include "cuda/cuda_test_support.h"
#include "model/encoder.h"
#include "support/m3_goldens.h"

namespace stoke {
namespace {

using test::m3::Batching;

TEST(CudaM3Golden, EagerMatchesFlagEmbedding) {
  STOKE_REQUIRE_GPU(backend);
  test::m3::expect_m3_matches_goldens(*backend, 1e-5, Batching::together, /*graphs=*/false);
  test::m3::expect_m3_matches_goldens(*backend, 1e-5, Batching::one_by_one, /*graphs=*/false);
}

TEST(CudaM3Golden, GraphsMatchFlagEmbedding) {
  STOKE_REQUIRE_GPU(backend);
  test::m3::expect_m3_matches_goldens(*backend, 1e-5, Batching::together, /*graphs=*/true, EncoderRunner::kGraphBucket);
  test::m3::expect_m3_matches_goldens(*backend, 1e-5, Batching::one_by_one, /*graphs=*/true, EncoderRunner::kGraphBucket);
}

}  // namespace
}  // namespace stoke
