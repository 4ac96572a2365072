// bge-m3's per-token outputs turned into each text's results
// (model/m3_outputs.h), on hand-made inputs whose answers follow from
// FlagEmbedding's rules (quoted in the header): the max weight per token id,
// only weights > 0, the cls/eos/pad/unk ids left out (mask kept), ids
// ascending; ColBERT rows 1 .. n - 1 of each sequence; and which ids are
// "unused", read from tokenizer_config.json / special_tokens_map.json as
// transformers 4 reads them.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "model/m3_outputs.h"
#include "support/fixtures.h"
#include "text/tokenizer_loader.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;

TEST(M3Outputs, LexicalWeightsKeepTheMaxPerIdAndDropSpecialsAndZeros) {
  const std::vector<int32_t> unused = {0, 1, 2, 3};
  // <s> the cat the <mask> cat <unk> the </s>
  const std::vector<int32_t> ids = {0, 50, 60, 50, 4001, 60, 3, 50, 2};
  const std::vector<float> w = {9.0f, 0.25f, 0.0f, 0.75f, 0.5f, 0.125f, 7.0f, 0.5f, 8.0f};
  const LexicalWeights lw = lexical_weights(ids, w, unused);
  EXPECT_EQ(lw.ids, (std::vector<int32_t>{50, 60, 4001}));
  EXPECT_EQ(lw.weights, (std::vector<float>{0.75f, 0.125f, 0.5f}));  // 50: max of .25 .75 .5; 60: the zero dropped
}

TEST(M3Outputs, ATextOfSpecialsOnlyHasNoLexicalWeight) {
  const std::vector<int32_t> unused = {0, 1, 2, 3}, ids = {0, 2};
  const std::vector<float> w = {1.0f, 2.0f};
  const LexicalWeights lw = lexical_weights(ids, w, unused);
  EXPECT_TRUE(lw.ids.empty());
  EXPECT_TRUE(lw.weights.empty());
}

TEST(M3Outputs, NanAndNegativeWeightsAreNotWeights) {
  const std::vector<int32_t> unused = {}, ids = {5, 6, 7};
  const std::vector<float> w = {std::nanf(""), -1.0f, 0.5f};
  const LexicalWeights lw = lexical_weights(ids, w, unused);
  EXPECT_EQ(lw.ids, (std::vector<int32_t>{7}));
}

TEST(M3Outputs, BatchRowsFollowCuSeqlensAndColbertSkipsTheFirstToken) {
  PackedBatch batch;
  batch.clear();
  batch.ids = {0, 10, 2, 0, 2, 0, 11, 11, 12, 2};
  batch.cu_seqlens = {0, 3, 5, 10};
  const std::vector<float> w = {0, 1, 0, 0, 0, 0, 2, 3, 1, 0};
  const auto rows = batch_lexical_weights(batch, w, std::vector<int32_t>{0, 1, 2, 3});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].ids, (std::vector<int32_t>{10}));
  EXPECT_TRUE(rows[1].ids.empty());
  EXPECT_EQ(rows[2].ids, (std::vector<int32_t>{11, 12}));
  EXPECT_EQ(rows[2].weights, (std::vector<float>{3, 1}));
  // (T, 2) vectors numbered by their row: sequence 2 keeps rows 6..9 (EOS included).
  std::vector<float> colbert(20);
  for (size_t i = 0; i < colbert.size(); ++i) colbert[i] = static_cast<float>(i / 2);
  const auto v = colbert_vectors(batch, 2, colbert, 2);
  ASSERT_EQ(v.size(), 8u);
  EXPECT_EQ(v.front(), 6.0f);
  EXPECT_EQ(v.back(), 9.0f);
  EXPECT_EQ(colbert_rows(batch, 1).count, 1);  // <s> </s>: the EOS vector alone
}

// A folder holding only the given tokenizer json files.
fs::path json_folder(const std::string& name, const std::string& config, const std::string& map = "") {
  const fs::path dir = test::scratch_dir("m3-unused-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json") << config;
  if (!map.empty()) std::ofstream(dir / "special_tokens_map.json") << map;
  return dir;
}

TEST(M3Outputs, UnusedIdsAreClsEosPadUnkAsTransformersLoadsThem) {
  const fs::path bge = test::source_dir() / "tests/data/bge_m3_tiny/model";
  const auto xlmr = load_tokenizer(bge);
  EXPECT_EQ(m3_unused_token_ids(bge, *xlmr), (std::vector<int32_t>{0, 1, 2, 3}));
  // A legacy config (no added_tokens_decoder): special_tokens_map.json wins.
  EXPECT_EQ(m3_unused_token_ids(json_folder("legacy", R"({"eos_token": "</s>", "cls_token": "<s>", "tokenizer_class": "XLMRobertaTokenizer"})",
                                            R"({"eos_token": {"content": "<mask>"}})"),
                                *xlmr),
            (std::vector<int32_t>{0, 1, 3, 4001}));  // pad, unk: XLMRobertaTokenizer's defaults
  // A modern config: special_tokens_map.json is not read.
  EXPECT_EQ(m3_unused_token_ids(json_folder("modern", R"({"added_tokens_decoder": {}, "tokenizer_class": "XLMRobertaTokenizer"})",
                                            R"({"eos_token": "<mask>"})"),
                                *xlmr),
            (std::vector<int32_t>{0, 1, 2, 3}));
  // No tokenizer class anywhere (no config.json either): no defaults.
  EXPECT_EQ(m3_unused_token_ids(json_folder("classless", R"({"added_tokens_decoder": {}, "cls_token": "<s>"})"), *xlmr),
            (std::vector<int32_t>{0}));
  // Unset (null) leaves a token in; an unknown string is the unk id.
  EXPECT_EQ(m3_unused_token_ids(json_folder("null", R"({"tokenizer_class": "XLMRobertaTokenizer", "cls_token": null, "eos_token": "<nope>"})"),
                                *xlmr),
            (std::vector<int32_t>{1, 3}));
  // BertTokenizer has no eos token: [SEP] stays a lexical weight.
  const fs::path bert = test::fixture("models/tiny-bert");
  const auto wp = load_tokenizer(bert);
  EXPECT_EQ(m3_unused_token_ids(json_folder("bert", R"({"added_tokens_decoder": {}, "tokenizer_class": "BertTokenizer"})"), *wp),
            (std::vector<int32_t>{0, 1, 2}));  // [PAD] [UNK] [CLS]
}

}  // namespace
}  // namespace stoke
