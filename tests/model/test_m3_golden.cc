// bge-m3's dense, sparse (lexical weights) and ColBERT outputs from ONE
// forward against FlagEmbedding 1.3.5's BGEM3FlagModel.encode (goldens:
// tests/data/bge_m3_tiny, tests/golden/make_bge_m3.py), with the reference
// kernels and the fast ones, all texts in one batch and one text per batch:
// dense and ColBERT within f32 relative error 1e-5 per row, the same lexical
// token ids and their weights within 1e-5.
#include <gtest/gtest.h>

#include "cpu/cpu_backend.h"
#include "support/m3_goldens.h"

namespace stoke {
namespace {

using test::m3::Batching;

TEST(M3Golden, ReferenceKernelsMatchFlagEmbedding) {
  cpu::CpuBackend backend(cpu::reference_kernels());
  test::m3::expect_m3_matches_goldens(backend, 1e-5);
}

TEST(M3Golden, FastKernelsMatchFlagEmbedding) {
  cpu::CpuBackend backend(cpu::fast_kernels());
  test::m3::expect_m3_matches_goldens(backend, 1e-5);
}

TEST(M3Golden, OneTextPerBatchMatchesFlagEmbedding) {
  cpu::CpuBackend backend(cpu::fast_kernels());
  test::m3::expect_m3_matches_goldens(backend, 1e-5, Batching::one_by_one);
}

}  // namespace
}  // namespace stoke
