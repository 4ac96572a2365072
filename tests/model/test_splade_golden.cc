// A SPLADE sparse encoder (sentence-transformers SparseEncoder: MLMTransformer
// over BertForMaskedLM, then SpladePooling) against sentence-transformers
// 6.2.0's SparseEncoder.encode (goldens: tests/data/splade_tiny,
// tests/golden/make_splade.py), through the encoder runner and
// model/text_outputs.h: max and sum pooling, the log1p_relu activation,
// max_active_dims (--sparse-top-k), a DistilBertForMaskedLM, with the reference kernels and the fast
// ones, all texts in one batch and one text per batch, and the decoder GEMM
// cut into blocks of a few token rows (blocks that end inside a text, each
// pooled into what the earlier blocks left). Same ids, weights within 1e-5.
#include <gtest/gtest.h>

#include "cpu/cpu_backend.h"
#include "model/packed_batch.h"
#include "support/splade_goldens.h"

namespace stoke {
namespace {

using test::splade::Batching;
using SpladeRun = test::splade::Settings;

SpladeRun variant(const std::string& name) {
  SpladeRun r;
  r.variant = name;
  return r;
}

TEST(SpladeGolden, ReferenceKernelsMatchSentenceTransformers) {
  cpu::CpuBackend backend(cpu::reference_kernels());
  test::splade::expect_splade_matches_goldens(backend, 1e-5);
}

TEST(SpladeGolden, FastKernelsMatchSentenceTransformers) {
  cpu::CpuBackend backend(cpu::fast_kernels());
  for (const char* name : {"max", "sum", "log1p_relu", "top8", "distilbert"}) {
    SCOPED_TRACE(name);
    test::splade::expect_splade_matches_goldens(backend, 1e-5, variant(name));
  }
}

TEST(SpladeGolden, ReferenceKernelsMatchEveryVariant) {
  cpu::CpuBackend backend(cpu::reference_kernels());
  for (const char* name : {"sum", "log1p_relu", "top8", "distilbert"}) {
    SCOPED_TRACE(name);
    test::splade::expect_splade_matches_goldens(backend, 1e-5, variant(name));
  }
}

TEST(SpladeGolden, OneTextPerBatchMatches) {
  cpu::CpuBackend backend(cpu::fast_kernels());
  SpladeRun r;
  r.batching = Batching::one_by_one;
  test::splade::expect_splade_matches_goldens(backend, 1e-5, r);
}

TEST(SpladeGolden, DecoderBlocksOfFewRowsMatch) {
  cpu::CpuBackend backend(cpu::fast_kernels());
  for (const char* name : {"max", "sum"})
    for (int64_t rows : {5, 64}) {
      SCOPED_TRACE(std::string(name) + " in blocks of " + std::to_string(rows));
      SpladeRun r = variant(name);
      r.block_rows = rows;
      test::splade::expect_splade_matches_goldens(backend, 1e-5, r);
    }
}

// Inference-free SPLADE (a Router): documents run the encoder as the plain
// model does; queries are their tokens' static weights, with no forward.
TEST(SpladeGolden, InferenceFreeDocumentsMatchThePlainModel) {
  cpu::CpuBackend backend(cpu::fast_kernels());
  test::splade::expect_splade_matches_goldens(backend, 1e-5, variant("router"));
}

TEST(SpladeGolden, InferenceFreeQueriesAreTheirTokensStaticWeights) {
  const test::splade::Golden g = test::splade::open_golden();
  cpu::CpuBackend backend(cpu::fast_kernels());
  const ModelTokenizer mt = open_model_tokenizer((test::splade::data_dir() / "inference_free").string(), std::nullopt);
  LoadedEncoder enc = load_encoder(mt.folder.config, open_model_folder_weights(mt.folder), backend, {});
  load_splade_head(enc, mt.folder, backend);
  ASSERT_EQ(enc.splade.static_query.size(), 3000u);
  const TextOutputSettings doc = text_output_settings(enc, mt.folder.model_dir, *mt.tokenizer, true, false);
  EXPECT_FALSE(doc.static_query);
  const TextOutputSettings s =
      text_output_settings(enc, mt.folder.model_dir, *mt.tokenizer, true, false, TextRole::query);
  ASSERT_TRUE(s.static_query);
  EXPECT_EQ(sparse_host_floats(enc, s, 1024, 20), 0u);  // nothing comes back from the device
  EncoderOutputs out;
  set_text_output_destinations(enc, s, out, nullptr, nullptr);
  EXPECT_EQ(out.splade, nullptr);
  const auto idx = g.get("query_indices"), val = g.get("query_values"), ptr = g.get("query_indptr");
  EncoderRunner runner(enc, backend, 4096, 32);
  PackedBatch batch;
  batch.clear();
  std::vector<Encoding> encodings;
  for (const std::string& text : g.texts) {
    encodings.push_back(text_encoding(*mt.tokenizer, s, TextInput{text, std::nullopt}, EncodeOptions{}));
    batch.add(encodings.back().ids, encodings.back().type_ids, mt.folder.config);
  }
  backend.wait(*runner.run(batch, out));  // asks for nothing: no forward
  for (size_t i = 0; i < g.texts.size(); ++i) {
    const auto first = static_cast<int64_t>(batch.cu_seqlens[i]);
    const TextExtras x = text_extras(enc, s, encodings[i].ids, first, static_cast<int64_t>(i), nullptr, nullptr);
    const auto s0 = static_cast<size_t>(ptr[i]), s1 = static_cast<size_t>(ptr[i + 1]);
    ASSERT_EQ(x.sparse.ids.size(), s1 - s0) << "query " << i;
    for (size_t k = s0; k < s1; ++k) {
      EXPECT_EQ(x.sparse.ids[k - s0], static_cast<int32_t>(idx[k])) << "query " << i;
      EXPECT_EQ(x.sparse.weights[k - s0], static_cast<float>(val[k])) << "query " << i;  // the stored weight itself
    }
  }
}

TEST(SpladeGolden, TheLogitsBlockIsBoundedByTheBudget) {
  EXPECT_EQ(splade_block_rows(30522, 16384), kSpladeBlockBytes / (30522 * 4));  // 549 rows, not 16k: 64 MiB
  EXPECT_LE(splade_block_rows(30522, 16384) * 30522 * 4, kSpladeBlockBytes);
  EXPECT_EQ(splade_block_rows(3000, 100), 100);     // a small batch: one block
  EXPECT_EQ(splade_block_rows(1 << 30, 100), 1);    // at least one row
}

}  // namespace
}  // namespace stoke
