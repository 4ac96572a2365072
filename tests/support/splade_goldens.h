// A SPLADE sparse encoder's rows against sentence-transformers 6.2.0's
// SparseEncoder.encode (goldens: tests/data/splade_tiny, made by
// tests/golden/make_splade.py), through the encoder runner and
// model/text_outputs.h, on any backend: the check the CPU model test and the
// CUDA test share. Per text: the same token ids (ascending), each weight
// within tol relative to the row's largest (an f32 dot product's rounding is
// relative to its terms, not to a small result). The goldens' margin says no
// id lies within 1e-4 of the ReLU's cut, so a 1e-5 comparison cannot flip one.
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
#include "model/splade_head.h"
#include "model/text_outputs.h"
#include "support/fixtures.h"
#include "support/goldens.h"

namespace stoke::test::splade {

inline std::filesystem::path data_dir() { return test::source_dir() / "tests" / "data" / "splade_tiny"; }
inline std::filesystem::path model_dir() { return data_dir() / "model"; }

struct Golden {
  std::vector<std::string> texts;
  int64_t max_length = 0, top_k = 0;
  std::shared_ptr<SafetensorsFile> tensors;
  std::vector<double> get(const std::string& name) const { return goldens::golden(*tensors, name); }
};

inline Golden open_golden() {
  Golden g;
  std::ifstream in(data_dir() / "golden.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  for (const auto& t : j["texts"]) g.texts.push_back(t.get<std::string>());
  g.max_length = j["max_length"].get<int64_t>();
  g.top_k = j["top_k"].get<int64_t>();
  g.tensors = SafetensorsFile::open(data_dir() / "golden.safetensors");
  return g;
}

// The model folder of a golden variant: the saved one ("max", "top8"), or a
// scratch copy whose 1_SpladePooling/config.json says what the variant
// changed ("sum", "log1p_relu").
inline std::filesystem::path variant_model(const std::string& variant) {
  if (variant == "max" || variant == "top8") return model_dir();
  if (variant == "router") return data_dir() / "inference_free";  // its documents: the "max" goldens
  if (variant == "distilbert") return data_dir() / "distilbert";
  const std::filesystem::path dir = test::scratch_dir("splade-variant-" + variant);
  std::filesystem::copy(model_dir(), dir, std::filesystem::copy_options::recursive |
                                              std::filesystem::copy_options::overwrite_existing);
  nlohmann::json cfg = {{"pooling_strategy", variant == "sum" ? "sum" : "max"},
                        {"activation_function", variant == "log1p_relu" ? "log1p_relu" : "relu"},
                        {"embedding_dimension", nullptr}};
  std::ofstream(dir / "1_SpladePooling" / "config.json", std::ios::trunc) << cfg.dump(2);
  return dir;
}

enum class Batching { together, one_by_one };

struct Settings {
  std::string variant = "max";  // max, sum, log1p_relu, top8; router: inference_free/'s documents (max's goldens)
  Batching batching = Batching::together;
  int64_t block_rows = 0;       // > 0: the decoder GEMM in blocks of this many token rows
  bool graphs = false;
  int64_t extra_tokens = 0;     // runner room past the texts' tokens (a graph's bucket padding)
};

inline void expect_splade_matches_goldens(Backend& backend, double tol, const Settings& how = {}) {
  const Golden g = open_golden();
  const ModelTokenizer mt = open_model_tokenizer(variant_model(how.variant).string(), std::nullopt);
  ASSERT_EQ(mt.max_length, g.max_length);
  ASSERT_TRUE(mt.folder.st.splade.has_value());
  LoadedEncoder enc = load_encoder(mt.folder.config, open_model_folder_weights(mt.folder), backend, {});
  load_splade_head(enc, mt.folder, backend);
  ASSERT_TRUE(enc.splade.present());
  const TextOutputSources src = text_output_sources(enc, mt.tokenizer->vocab_size());
  EXPECT_EQ(src.sparse, SparseSource::splade);
  EXPECT_FALSE(src.dense);
  const int64_t V = src.sparse_columns;
  TextOutputSettings settings;
  settings.sparse = true;
  settings.sparse_top_k = how.variant == "top8" ? g.top_k : 0;

  // The tokenizer first: a mismatch here would be the tokenizer's, not the head's.
  const auto want_ids = g.get("input_ids"), id_offsets = g.get("input_ids_offsets");
  std::vector<Encoding> encodings;
  EncodeOptions eo;
  eo.max_length = static_cast<size_t>(g.max_length);
  for (size_t i = 0; i < g.texts.size(); ++i) {
    encodings.push_back(mt.tokenizer->encode(g.texts[i], eo));
    const std::vector<int32_t> want(want_ids.begin() + static_cast<int64_t>(id_offsets[i]),
                                    want_ids.begin() + static_cast<int64_t>(id_offsets[i + 1]));
    ASSERT_EQ(encodings[i].ids, want) << "text " << i << ": stoke's tokenizer disagrees with transformers'";
  }

  const std::string name = how.variant == "router" ? "max" : how.variant;
  const auto sp_idx = g.get(name + "_indices"), sp_val = g.get(name + "_values"), sp_ptr = g.get(name + "_indptr");
  const size_t N = g.texts.size();
  std::vector<std::vector<size_t>> groups;
  if (how.batching == Batching::together) {
    groups.emplace_back();
    for (size_t i = 0; i < N; ++i) groups.back().push_back(i);
  } else {
    for (size_t i = 0; i < N; ++i) groups.push_back({i});
  }
  int64_t max_t = 0;
  for (const Encoding& e : encodings) max_t += static_cast<int64_t>(e.ids.size());
  EncoderRunner runner(enc, backend, max_t + how.extra_tokens, static_cast<int64_t>(N));
  runner.set_graphs(how.graphs);
  if (how.block_rows > 0) runner.set_splade_block_rows(how.block_rows);
  std::vector<float> host(sparse_host_floats(enc, settings, max_t + how.extra_tokens, static_cast<int64_t>(N)));
  ASSERT_EQ(host.size(), N * static_cast<size_t>(V));
  for (const auto& group : groups) {
    PackedBatch batch;
    batch.clear();
    for (size_t i : group) batch.add(encodings[i].ids, encodings[i].type_ids, mt.folder.config);
    EncoderOutputs out;
    set_text_output_destinations(enc, settings, out, host.data(), nullptr);
    ASSERT_EQ(out.splade, host.data());
    backend.wait(*runner.run(batch, out));
    for (size_t b = 0; b < group.size(); ++b) {
      const size_t i = group[b];
      const auto first = static_cast<int64_t>(batch.cu_seqlens[b]);
      const TextExtras x = text_extras(enc, settings, encodings[i].ids, first, static_cast<int64_t>(b), host.data(), nullptr);
      const size_t s0 = static_cast<size_t>(sp_ptr[i]), s1 = static_cast<size_t>(sp_ptr[i + 1]);
      std::vector<int32_t> want(sp_idx.begin() + static_cast<int64_t>(s0), sp_idx.begin() + static_cast<int64_t>(s1));
      ASSERT_EQ(x.sparse.ids, want) << name << ": token ids of text " << i;
      double floor = 0;
      for (size_t k = s0; k < s1; ++k) floor = std::max(floor, std::abs(sp_val[k]));
      for (size_t k = s0; k < s1; ++k)
        EXPECT_LE(std::abs(x.sparse.weights[k - s0] - sp_val[k]), tol * floor)
            << name << ": weight of id " << want[k - s0] << " in text " << i << ": " << x.sparse.weights[k - s0]
            << " vs " << sp_val[k];
    }
  }
}

}  // namespace stoke::test::splade
