// A PyLate ColBERT model's query and document vectors against PyLate 1.6.0's
// ColBERT.encode (goldens: tests/data/colbert_tiny, tests/golden/make_colbert.py):
// the ids (prefix after [CLS], truncation at query_length / document_length,
// [MASK] expansion, the attention keys of unattended expansion tokens), then
// every vector within f32 relative error 1e-5, with the reference kernels
// and the fast ones, all texts in one batch and one text per batch; and
// maxsim_scores against rank.rerank's scores.
#include <gtest/gtest.h>

#include "cpu/cpu_backend.h"
#include "cpu/kernels.h"

#include <fstream>
#include <iterator>

#include "core/error.h"
#include "support/fixtures.h"
#include "support/colbert_goldens.h"

namespace stoke {
namespace {

using test::colbert::Batching;

TEST(ColbertGolden, ReferenceKernelsMatchPylate) {
  cpu::CpuBackend backend(cpu::reference_kernels());
  test::colbert::expect_vectors_match(backend, 1e-5, Batching::together);
}

TEST(ColbertGolden, FastKernelsMatchPylate) {
  cpu::CpuBackend backend(cpu::fast_kernels());
  test::colbert::expect_vectors_match(backend, 1e-5, Batching::together);
}

TEST(ColbertGolden, OneTextPerBatchMatchesPylate) {
  cpu::CpuBackend backend(cpu::fast_kernels());
  test::colbert::expect_vectors_match(backend, 1e-5, Batching::one_by_one);
}

TEST(ColbertGolden, MaxSimMatchesPylateRerank) {
  for (const cpu::Kernels* k : {&cpu::reference_kernels(), &cpu::fast_kernels()}) {
    cpu::CpuBackend backend(*k);
    test::colbert::expect_rerank_scores_match(backend, 1e-5);
  }
}

// The expansion tokens must not be keys: the same queries with every token a
// key give other vectors (the golden check above would catch a kernel that
// ignored key_lens only through these numbers; this says so directly).
TEST(ColbertGolden, ExpansionTokensAreNotKeys) {
  cpu::CpuBackend backend(cpu::fast_kernels());
  const test::colbert::Model m = test::colbert::open_model(backend);
  TextOutputSettings s = text_output_settings(m.enc, m.mt.folder.model_dir, *m.mt.tokenizer, false, true, TextRole::query);
  ASSERT_TRUE(s.colbert_model.do_query_expansion);
  ASSERT_FALSE(s.colbert_model.attend_to_expansion_tokens);
  const Encoding e = text_encoding(*m.mt.tokenizer, s, TextInput{"a", std::nullopt}, {});
  ASSERT_EQ(e.ids.size(), 32u);
  EXPECT_EQ(colbert_query_keys(e.ids, s.colbert_model), 4);  // [CLS] [Q] a [SEP], then 28 [MASK]s
  std::vector<int32_t> keys;
  PackedBatch batch;
  batch.add(e.ids, e.type_ids, m.mt.folder.config);
  text_key_lens(s, batch.ids, batch.cu_seqlens, keys);
  EXPECT_EQ(keys, std::vector<int32_t>{4});
  s.colbert_model.attend_to_expansion_tokens = true;
  text_key_lens(s, batch.ids, batch.cu_seqlens, keys);
  EXPECT_TRUE(keys.empty()) << "every token a key: plain attention";
  s.role = TextRole::document;
  s.colbert_model.attend_to_expansion_tokens = false;
  text_key_lens(s, batch.ids, batch.cu_seqlens, keys);
  EXPECT_TRUE(keys.empty()) << "documents: every token a key";
}

// A copy of the model folder with one file rewritten: what stoke must refuse, in one line naming it.
std::filesystem::path edited_model(const std::string& name, const std::string& file, const std::string& from,
                                   const std::string& to) {
  namespace fs = std::filesystem;
  const fs::path dir = test::scratch_dir("colbert-edited-" + name);
  fs::copy(test::colbert::model_dir(), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  std::ifstream in(dir / file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << file << " has no " << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  std::ofstream(dir / file, std::ios::trunc) << text;
  return dir;
}

std::string refusal(const std::filesystem::path& dir) {
  cpu::CpuBackend backend(cpu::fast_kernels());
  try {
    const ModelTokenizer mt = open_model_tokenizer(dir.string(), std::nullopt);
    LoadedEncoder enc = load_encoder(mt.folder.config, open_model_folder_weights(mt.folder), backend, {});
    load_colbert_modules(enc, mt.folder, backend);
    (void)text_output_settings(enc, mt.folder.model_dir, *mt.tokenizer, false, true, TextRole::query);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ColbertFolder, WhatStokeCannotRunIsRefusedNamingTheField) {
  const std::string cfg = "config_sentence_transformers.json";
  EXPECT_NE(refusal(edited_model("prefix", cfg, "\"[Q] \"", "\"[X] \"")).find("\"query_prefix\": \"[X] \" is not a token"),
            std::string::npos);
  EXPECT_NE(refusal(edited_model("length", cfg, "\"document_length\": 180", "\"document_length\": 500"))
                .find("\"document_length\": 500 tokens, more than the model's 192 usable positions"),
            std::string::npos);
  EXPECT_NE(refusal(edited_model("bad-length", cfg, "\"query_length\": 32", "\"query_length\": \"32\""))
                .find("\"query_length\": expected a positive integer"),
            std::string::npos);
  EXPECT_NE(refusal(edited_model("residual", "1_Dense/config.json", "\"use_residual\": false", "\"use_residual\": true"))
                .find("\"use_residual\": true is not supported"),
            std::string::npos);
  EXPECT_NE(refusal(edited_model("activation", "1_Dense/config.json", "torch.nn.modules.linear.Identity",
                                 "torch.nn.modules.activation.ReLU"))
                .find("activation_function"),
            std::string::npos);
  EXPECT_EQ(refusal(test::colbert::model_dir()), "") << "the folder itself loads";
}

}  // namespace
}  // namespace stoke
