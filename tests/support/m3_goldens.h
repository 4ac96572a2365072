// bge-m3's three outputs from one forward against FlagEmbedding's goldens
// (tests/data/bge_m3_tiny, made by tests/golden/make_bge_m3.py), on any
// backend: the check the CPU model test and the CUDA test share.
//   dense  (CLS, normalized)        relative L2 error <= tol per row
//   colbert (tokens 1.., normalized) relative L2 error <= tol per vector
//   sparse (lexical weights)         the same token ids per text, each weight within tol (relative, with the
//                                    row's largest weight as the floor: an f32 dot product's rounding is
//                                    relative to its terms, not to a small result)
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "jobs/model_tokenizer.h"
#include "model/encoder.h"
#include "model/m3_heads.h"
#include "model/m3_outputs.h"
#include "support/goldens.h"

namespace stoke::test::m3 {

inline std::filesystem::path data_dir() { return test::source_dir() / "tests" / "data" / "bge_m3_tiny"; }
inline std::filesystem::path model_dir() { return data_dir() / "model"; }

struct Golden {
  std::vector<std::string> texts;
  int64_t max_length = 0;
  std::shared_ptr<SafetensorsFile> tensors;
  std::vector<double> get(const std::string& name) const { return goldens::golden(*tensors, name); }
};

inline Golden open_golden() {
  Golden g;
  std::ifstream in(data_dir() / "golden.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  for (const auto& t : j["texts"]) g.texts.push_back(t.get<std::string>());
  g.max_length = j["max_length"].get<int64_t>();
  g.tensors = SafetensorsFile::open(data_dir() / "golden.safetensors");
  return g;
}

using goldens::row_error;  // support/goldens.h

// How the texts are batched: all in one packed batch, or one text per batch
// (a different GEMM shape: the results must agree all the same).
enum class Batching { together, one_by_one };

inline void expect_m3_matches_goldens(Backend& backend, double tol, Batching batching = Batching::together,
                                      bool graphs = false, int64_t extra_tokens = 0) {
  const Golden g = open_golden();
  const ModelTokenizer mt = open_model_tokenizer(model_dir().string(), std::nullopt);
  ASSERT_EQ(mt.max_length, g.max_length);
  LoadedEncoder enc = load_encoder(mt.folder.config, open_model_folder_weights(mt.folder), backend, {});
  load_dense_modules(enc, mt.folder.dir, mt.folder.st.dense, backend);
  load_m3_heads(enc, mt.folder.dir, backend);
  ASSERT_TRUE(enc.m3.has_sparse() && enc.m3.has_colbert());
  const int64_t H = mt.folder.config.hidden_size, D = enc.m3.colbert_dim();
  const std::vector<int32_t> unused = m3_unused_token_ids(mt.folder.dir, *mt.tokenizer);
  EXPECT_EQ(unused, (std::vector<int32_t>{0, 1, 2, 3}));  // <s>, <pad>, </s>, <unk>

  // The tokenizer first: a mismatch here would be the tokenizer's, not the heads'.
  const auto want_ids = g.get("input_ids"), id_offsets = g.get("input_ids_offsets");
  std::vector<Encoding> encodings;
  EncodeOptions eo;
  eo.max_length = static_cast<size_t>(g.max_length);
  for (size_t i = 0; i < g.texts.size(); ++i) {
    encodings.push_back(mt.tokenizer->encode(g.texts[i], eo));
    const std::vector<int32_t> want(want_ids.begin() + static_cast<int64_t>(id_offsets[i]),
                                    want_ids.begin() + static_cast<int64_t>(id_offsets[i + 1]));
    ASSERT_EQ(encodings[i].ids, want) << "text " << i << ": stoke's tokenizer disagrees with FlagEmbedding's";
  }

  const auto dense_w = g.get("dense_vecs"), colbert_w = g.get("colbert_vecs"), colbert_off = g.get("colbert_offsets");
  const auto sp_idx = g.get("sparse_indices"), sp_val = g.get("sparse_values"), sp_ptr = g.get("sparse_indptr");
  const size_t N = g.texts.size();
  std::vector<std::vector<size_t>> groups;
  if (batching == Batching::together) {
    groups.emplace_back();
    for (size_t i = 0; i < N; ++i) groups.back().push_back(i);
  } else {
    for (size_t i = 0; i < N; ++i) groups.push_back({i});
  }
  int64_t max_t = 0;
  for (const Encoding& e : encodings) max_t += static_cast<int64_t>(e.ids.size());
  EncoderRunner runner(enc, backend, max_t + extra_tokens, static_cast<int64_t>(N));
  runner.set_graphs(graphs);
  for (const auto& group : groups) {
    PackedBatch batch;
    batch.clear();
    for (size_t i : group) batch.add(encodings[i].ids, encodings[i].type_ids, mt.folder.config);
    const size_t B = group.size(), T = static_cast<size_t>(batch.tokens());
    std::vector<float> dense(B * static_cast<size_t>(H)), sparse(T), colbert(T * static_cast<size_t>(D));
    EncoderOutputs out;
    out.pooled = dense.data();
    out.pooling = Pooling::cls;
    out.normalize = true;
    out.sparse_weights = sparse.data();
    out.colbert = colbert.data();
    backend.wait(*runner.run(batch, out));  // one run: all three outputs from one forward

    const std::vector<LexicalWeights> lexical = batch_lexical_weights(batch, sparse, unused);
    for (size_t b = 0; b < B; ++b) {
      const size_t i = group[b];
      EXPECT_LE(row_error(&dense[b * H], &dense_w[i * H], static_cast<size_t>(H)), tol) << "dense, text " << i;

      const std::span<const float> vecs = colbert_vectors(batch, static_cast<int64_t>(b), colbert, D);
      const size_t first = static_cast<size_t>(colbert_off[i]), count = static_cast<size_t>(colbert_off[i + 1]) - first;
      ASSERT_EQ(vecs.size(), count * static_cast<size_t>(D)) << "ColBERT vectors of text " << i;
      for (size_t v = 0; v < count; ++v)
        EXPECT_LE(row_error(&vecs[v * D], &colbert_w[(first + v) * D], static_cast<size_t>(D)), tol)
            << "ColBERT vector " << v << " of text " << i;

      const size_t s0 = static_cast<size_t>(sp_ptr[i]), s1 = static_cast<size_t>(sp_ptr[i + 1]);
      std::vector<int32_t> want(sp_idx.begin() + static_cast<int64_t>(s0), sp_idx.begin() + static_cast<int64_t>(s1));
      ASSERT_EQ(lexical[b].ids, want) << "lexical weight ids of text " << i;
      double floor = 0;
      for (size_t k = s0; k < s1; ++k) floor = std::max(floor, std::abs(sp_val[k]));
      for (size_t k = s0; k < s1; ++k)
        EXPECT_LE(std::abs(lexical[b].weights[k - s0] - sp_val[k]), tol * floor)
            << "weight of id " << want[k - s0] << " in text " << i << ": " << lexical[b].weights[k - s0] << " vs "
            << sp_val[k];
    }
  }
}

}  // namespace stoke::test::m3
