// A SPLADE sparse encoder on the CUDA backend against sentence-transformers
// 6.2.0's SparseEncoder.encode (tests/data/splade_tiny): the MLM head's GEMMs
// and splade_pool in the forward, eagerly and through graph replay (the head
// is part of the captured forward), max and sum pooling, log1p_relu, top-k,
// the decoder in blocks of a few rows: the same f32 bounds as on the CPU
// (1e-5). Skipped, with the reason, where there is no GPU.
#include <gtest/gtest.h>

#include "cuda/cuda_test_support.h"
#include "model/encoder.h"
#include "support/splade_goldens.h"

namespace stoke {
namespace {

using test::splade::Batching;
using SpladeRun = test::splade::Settings;

TEST(CudaSpladeGolden, EagerMatchesSentenceTransformers) {
  STOKE_REQUIRE_GPU(backend);
  for (const char* name : {"max", "sum", "log1p_relu", "top8"}) {
    SCOPED_TRACE(name);
    SpladeRun r;
    r.variant = name;
    test::splade::expect_splade_matches_goldens(*backend, 1e-5, r);
    r.batching = Batching::one_by_one;
    test::splade::expect_splade_matches_goldens(*backend, 1e-5, r);
    r.batching = Batching::together;
    r.block_rows = 7;
    test::splade::expect_splade_matches_goldens(*backend, 1e-5, r);
  }
}

TEST(CudaSpladeGolden, GraphsMatchSentenceTransformers) {
  STOKE_REQUIRE_GPU(backend);
  for (Batching batching : {Batching::together, Batching::one_by_one}) {
    SpladeRun r;
    r.batching = batching;
    r.graphs = true;
    r.extra_tokens = EncoderRunner::kGraphBucket;
    test::splade::expect_splade_matches_goldens(*backend, 1e-5, r);
  }
}

}  // namespace
}  // namespace stoke
