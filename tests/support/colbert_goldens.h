// A PyLate ColBERT model's query and document vectors, and MaxSim scores,
// against PyLate 1.6.0's goldens (tests/data/colbert_tiny, made by
// tests/golden/make_colbert.py), on any backend: the ids first (prefix,
// truncation, [MASK] expansion, attention keys), then every vector of every
// text within relative L2 error tol, then maxsim_scores against
// rank.rerank's scores.
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
#include "model/colbert_model.h"
#include "model/encoder.h"
#include "model/maxsim.h"
#include "model/text_outputs.h"
#include "support/goldens.h"

namespace stoke::test::colbert {

inline std::filesystem::path data_dir() { return test::source_dir() / "tests" / "data" / "colbert_tiny"; }
inline std::filesystem::path model_dir() { return data_dir() / "model"; }

struct Golden {
  std::vector<std::string> texts;
  int64_t dim = 0;
  std::shared_ptr<SafetensorsFile> tensors;
  std::vector<double> get(const std::string& name) const { return goldens::golden(*tensors, name); }
};

inline Golden open_golden() {
  Golden g;
  std::ifstream in(data_dir() / "golden.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  for (const auto& t : j["texts"]) g.texts.push_back(t.get<std::string>());
  g.dim = j["colbert_dim"].get<int64_t>();
  g.tensors = SafetensorsFile::open(data_dir() / "golden.safetensors");
  return g;
}

using goldens::row_error;  // support/goldens.h

struct Model {
  ModelTokenizer mt;
  LoadedEncoder enc;
};

inline Model open_model(Backend& backend) {
  Model m{open_model_tokenizer(model_dir().string(), std::nullopt), {}};
  m.enc = load_encoder(m.mt.folder.config, open_model_folder_weights(m.mt.folder), backend, {});
  load_colbert_modules(m.enc, m.mt.folder, backend);
  return m;
}

enum class Batching { together, one_by_one };

// Every text's vectors for `role`, computed in batches as `batching` says,
// as the embed pipeline computes them (text_encoding, text_key_lens,
// set_text_output_destinations, text_extras).
inline std::vector<std::vector<float>> encode_all(Backend& backend, const Model& m, const std::vector<std::string>& texts,
                                                  TextRole role, Batching batching, bool graphs = false) {
  const TextOutputSettings s =
      text_output_settings(m.enc, m.mt.folder.model_dir, *m.mt.tokenizer, false, true, role);
  std::vector<Encoding> enc;
  for (const std::string& t : texts) enc.push_back(text_encoding(*m.mt.tokenizer, s, TextInput{t, std::nullopt}, {}));
  int64_t max_t = 0;
  for (const Encoding& e : enc) max_t += static_cast<int64_t>(e.ids.size());
  EncoderRunner runner(m.enc, backend, max_t + EncoderRunner::kGraphBucket, static_cast<int64_t>(texts.size()));
  runner.set_graphs(graphs);
  std::vector<std::vector<size_t>> groups;
  if (batching == Batching::together) {
    groups.emplace_back();
    for (size_t i = 0; i < texts.size(); ++i) groups.back().push_back(i);
  } else {
    for (size_t i = 0; i < texts.size(); ++i) groups.push_back({i});
  }
  const auto D = static_cast<size_t>(m.enc.colbert_dense.back().w.dim(0));
  std::vector<std::vector<float>> result(texts.size());
  for (const auto& group : groups) {
    PackedBatch batch;
    batch.clear();
    for (size_t i : group) batch.add(enc[i].ids, enc[i].type_ids, m.mt.folder.config);
    std::vector<float> pooled(group.size() * static_cast<size_t>(m.mt.folder.config.hidden_size));
    std::vector<float> colbert(static_cast<size_t>(batch.tokens()) * D);
    EncoderOutputs out;
    out.pooled = pooled.data();
    set_text_output_destinations(m.enc, s, out, nullptr, colbert.data());
    std::vector<int32_t> keys;
    text_key_lens(s, batch.ids, batch.cu_seqlens, keys);
    out.key_lens = keys;
    backend.wait(*runner.run(batch, out));
    int64_t first = 0;
    for (size_t b = 0; b < group.size(); ++b) {
      const Encoding& e = enc[group[b]];
      result[group[b]] = text_extras(m.enc, s, e.ids, first, static_cast<int64_t>(b), nullptr, colbert.data()).colbert;
      first += static_cast<int64_t>(e.ids.size());
    }
  }
  return result;
}

// The ids and keys PyLate's tokenize gives, text by text.
inline void expect_ids_match(const Model& m, const Golden& g) {
  for (TextRole role : {TextRole::query, TextRole::document}) {
    const TextOutputSettings s =
        text_output_settings(m.enc, m.mt.folder.model_dir, *m.mt.tokenizer, false, true, role);
    const std::string name = role == TextRole::query ? "query" : "document";
    const auto ids = g.get(name + "_ids"), off = g.get(name + "_ids_offsets");
    const auto keys = g.get("query_keys");
    for (size_t i = 0; i < g.texts.size(); ++i) {
      const Encoding e = text_encoding(*m.mt.tokenizer, s, TextInput{g.texts[i], std::nullopt}, {});
      const std::vector<int32_t> want(ids.begin() + static_cast<int64_t>(off[i]), ids.begin() + static_cast<int64_t>(off[i + 1]));
      ASSERT_EQ(e.ids, want) << name << " " << i << ": stoke's ids differ from PyLate's tokenize";
      if (role == TextRole::query)
        EXPECT_EQ(colbert_query_keys(e.ids, s.colbert_model), static_cast<int32_t>(keys[i]))
            << "attention keys of query " << i;
    }
  }
}

inline void expect_vectors_match(Backend& backend, double tol, Batching batching, bool graphs = false) {
  const Golden g = open_golden();
  const Model m = open_model(backend);
  ASSERT_EQ(m.enc.colbert_dense.size(), 1u);
  ASSERT_EQ(m.enc.colbert_dense.back().w.dim(0), g.dim);
  expect_ids_match(m, g);
  const auto D = static_cast<size_t>(g.dim);
  for (TextRole role : {TextRole::query, TextRole::document}) {
    const std::string name = role == TextRole::query ? "query" : "document";
    const auto want = g.get(name + "_vecs"), off = g.get(name + "_offsets");
    const std::vector<std::vector<float>> got = encode_all(backend, m, g.texts, role, batching, graphs);
    for (size_t i = 0; i < g.texts.size(); ++i) {
      const size_t n = static_cast<size_t>(off[i + 1] - off[i]);
      ASSERT_EQ(got[i].size(), n * D) << name << " " << i << ": vector count";
      for (size_t v = 0; v < n; ++v)
        EXPECT_LE(row_error(&got[i][v * D], &want[(static_cast<size_t>(off[i]) + v) * D], D), tol)
            << name << " " << i << ", vector " << v;
    }
  }
}

// maxsim_scores of the golden query vectors against the golden document
// vectors, as rank.rerank scored them.
inline void expect_rerank_scores_match(Backend& backend, double tol) {
  const Golden g = open_golden();
  const auto D = static_cast<size_t>(g.dim);
  const auto qv = g.get("query_vecs"), qo = g.get("query_offsets");
  const auto dv = g.get("document_vecs"), dof = g.get("document_offsets");
  const auto rq = g.get("rerank_queries"), rd = g.get("rerank_documents"), want = g.get("rerank_scores");
  const size_t K = rd.size() / rq.size();
  for (size_t a = 0; a < rq.size(); ++a) {
    const auto q = static_cast<size_t>(rq[a]);
    std::vector<float> query(qv.begin() + static_cast<int64_t>(qo[q] * D), qv.begin() + static_cast<int64_t>(qo[q + 1] * D));
    std::vector<float> docs;
    std::vector<int64_t> offsets{0};
    for (size_t k = 0; k < K; ++k) {
      const auto d = static_cast<size_t>(rd[a * K + k]);
      docs.insert(docs.end(), dv.begin() + static_cast<int64_t>(dof[d] * D), dv.begin() + static_cast<int64_t>(dof[d + 1] * D));
      offsets.push_back(static_cast<int64_t>(docs.size() / D));
    }
    const std::vector<float> scores = maxsim_scores(backend, query, g.dim, docs, offsets);
    ASSERT_EQ(scores.size(), K);
    for (size_t k = 0; k < K; ++k)
      EXPECT_LE(std::abs(scores[k] - want[a * K + k]), tol * std::max(1.0, std::abs(want[a * K + k])))
          << "query " << q << " vs document " << rd[a * K + k] << ": " << scores[k] << " vs " << want[a * K + k];
  }
}

}  // namespace stoke::test::colbert
