// Token ids must be exactly those of Hugging Face's tokenizers: every golden
// text of both fixture models, single texts, pairs and truncation, through each
// way a tokenizer can be loaded.
#include <gtest/gtest.h>

#include <filesystem>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "support/fixtures.h"
#include "support/jsonl.h"
#include "text/tokenizer_loader.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using test::read_jsonl;

std::vector<std::string> golden_texts() {
  std::vector<std::string> texts;
  for (const auto& row : read_jsonl(test::fixture("golden/texts.jsonl"))) texts.push_back(row["text"]);
  return texts;
}

// A copy of a fixture model without some files, to force another loading path.
fs::path model_copy_without(const std::string& model, const std::vector<std::string>& drop) {
  fs::path dst = test::scratch_dir(model + "-without");
  fs::copy(test::fixture("models/" + model), dst, fs::copy_options::recursive);
  for (const auto& f : drop) fs::remove(dst / f);
  return dst;
}

void expect_matches_token_goldens(const Tokenizer& tok, const std::string& model) {
  const auto texts = golden_texts();
  const auto goldens = read_jsonl(test::fixture("golden/" + model + ".tokens.jsonl"));
  ASSERT_EQ(texts.size(), goldens.size());
  ASSERT_EQ(texts.size(), 66u);
  for (size_t i = 0; i < texts.size(); ++i) {
    const Encoding enc = tok.encode(texts[i], EncodeOptions{0, false});
    const auto want = goldens[i]["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(enc.ids, want) << model << " text " << i << ": " << texts[i].substr(0, 80);
    const auto want_tokens = goldens[i]["tokens"].get<std::vector<std::string>>();
    std::vector<std::string> tokens;
    for (int32_t id : enc.ids) tokens.push_back(tok.id_to_token(id));
    EXPECT_EQ(tokens, want_tokens) << model << " text " << i;
  }
}

TEST(TokenizerGolden, BertFromTokenizerJson) {
  auto tok = load_tokenizer(test::fixture("models/tiny-bert"));
  EXPECT_EQ(tok->source, "tokenizer.json");
  EXPECT_EQ(tok->vocab_size(), 3000);
  expect_matches_token_goldens(*tok, "tiny-bert");
}

TEST(TokenizerGolden, BertFromVocabTxt) {
  auto tok = load_tokenizer(model_copy_without("tiny-bert", {"tokenizer.json"}));
  EXPECT_EQ(tok->source, "vocab.txt + tokenizer_config.json");
  EXPECT_EQ(tok->vocab_size(), 3000);
  EXPECT_EQ(tok->model_max_length, 128);
  expect_matches_token_goldens(*tok, "tiny-bert");
}

TEST(TokenizerGolden, XlmrFromSentencePiece) {
  auto tok = load_tokenizer(test::fixture("models/tiny-xlmr"));
  EXPECT_EQ(tok->vocab_size(), 4002);
  EXPECT_EQ(tok->token_to_id("<mask>"), 4001);
  expect_matches_token_goldens(*tok, "tiny-xlmr");
}

// The padded batch in the golden safetensors: ids, attention mask and token
// type ids after truncation to 128, for all texts at once on a thread pool.
void expect_matches_batch_goldens(const Tokenizer& tok, const std::string& model, const std::string& prefix,
                                  const std::vector<TextInput>& inputs, bool has_type_ids) {
  auto golden = SafetensorsFile::open(test::fixture("golden/" + model + ".safetensors"));
  const StoredTensor* ids = golden->find(prefix + "input_ids");
  const StoredTensor* mask = golden->find(prefix + "attention_mask");
  ASSERT_NE(ids, nullptr);
  ASSERT_NE(mask, nullptr);
  const StoredTensor* types = has_type_ids ? golden->find(prefix + "token_type_ids") : nullptr;
  if (has_type_ids) {
    ASSERT_NE(types, nullptr);
  }
  ASSERT_EQ(ids->shape.size(), 2u);
  ASSERT_EQ(static_cast<size_t>(ids->shape[0]), inputs.size());
  const size_t width = static_cast<size_t>(ids->shape[1]);
  auto at = [](const StoredTensor* t, size_t k) {
    int64_t v;
    std::memcpy(&v, t->data.data() + k * 8, 8);
    return v;
  };
  ThreadPool pool(2);
  EncodeStats stats;
  const auto encs = tok.encode_batch(inputs, EncodeOptions{128, true}, &pool, &stats);
  size_t longest = 0, truncated = 0;
  for (size_t r = 0; r < encs.size(); ++r) {
    longest = std::max(longest, encs[r].ids.size());
    truncated += encs[r].truncated;
    ASSERT_LE(encs[r].ids.size(), 128u);
    for (size_t c = 0; c < width; ++c) {
      const bool real = c < encs[r].ids.size();
      const size_t k = r * width + c;
      ASSERT_EQ(at(ids, k), real ? encs[r].ids[c] : tok.pad_id()) << prefix << " row " << r << " col " << c;
      ASSERT_EQ(at(mask, k), real ? 1 : 0) << prefix << " row " << r << " col " << c;
      if (types) {
        ASSERT_EQ(at(types, k), real ? encs[r].type_ids[c] : 0) << prefix << " row " << r << " col " << c;
      }
    }
  }
  EXPECT_EQ(longest, width);  // padded to the longest, as the goldens are
  EXPECT_EQ(stats.truncated, truncated);
}

TEST(TokenizerGolden, BertBatchWithTruncation) {
  auto tok = load_tokenizer(test::fixture("models/tiny-bert"));
  const auto texts = golden_texts();
  std::vector<TextInput> inputs;
  for (const auto& t : texts) inputs.push_back({t, std::nullopt});
  expect_matches_batch_goldens(*tok, "tiny-bert", "", inputs, true);
}

TEST(TokenizerGolden, XlmrBatchWithTruncation) {
  auto tok = load_tokenizer(test::fixture("models/tiny-xlmr"));
  const auto texts = golden_texts();
  std::vector<TextInput> inputs;
  for (const auto& t : texts) inputs.push_back({t, std::nullopt});
  expect_matches_batch_goldens(*tok, "tiny-xlmr", "", inputs, false);
}

TEST(TokenizerGolden, BertPairsLongestFirst) {
  const json meta = json::parse(read_file(test::fixture("golden/tiny-bert.json")));
  const auto texts = golden_texts();
  std::vector<TextInput> inputs;
  for (const auto& p : meta["pairs"])
    inputs.push_back({texts[p["a_index"].get<size_t>()], std::string_view(texts[p["b_index"].get<size_t>()])});
  ASSERT_EQ(inputs.size(), 5u);
  for (const auto& dir : {test::fixture("models/tiny-bert"), model_copy_without("tiny-bert", {"tokenizer.json"})}) {
    auto tok = load_tokenizer(dir);
    expect_matches_batch_goldens(*tok, "tiny-bert", "pair.", inputs, true);
  }
}

// Truncation on either side (transformers' truncation_side, TEI's
// truncation_direction) against transformers 5.24 / tokenizers 0.23.3: every
// golden text alone and paired with the next (longest_first), at max lengths
// 6 and 16; special tokens stay where the template puts them
// (tests/golden/tokenizers/make_truncation_goldens.py). Pairs too, and pairs
// of equal and unequal length cut to odd and even budgets: the tie-break of
// HF's Rust tokenizers (what TEI and sentence-transformers run).
TEST(TokenizerGolden, TruncationLeftAndRightMatchTransformers) {
  const auto texts = golden_texts();
  const auto dir = std::filesystem::path(STOKE_SOURCE_DIR) / "tests" / "golden" / "tokenizers";
  auto rows = read_jsonl(dir / "truncation.expected.jsonl");
  ASSERT_GT(rows.size(), 1000u);
  const auto pair_rows = read_jsonl(dir / "truncation_pairs.expected.jsonl");
  ASSERT_GT(pair_rows.size(), 100u);
  rows.insert(rows.end(), pair_rows.begin(), pair_rows.end());
  std::map<std::string, std::unique_ptr<Tokenizer>> toks;
  toks["tiny-bert"] = load_tokenizer(test::fixture("models/tiny-bert"));
  toks["tiny-xlmr"] = load_tokenizer(test::fixture("models/tiny-xlmr"));
  size_t left_cut = 0, pairs = 0, odd_ties = 0;
  for (const json& row : rows) {
    // XLM-R text 50 (control characters) has other ids in the Rust tokenizer
    // than in the slow one stoke matches (tiny-xlmr.tokens.jsonl), cut or not.
    if (row["model"] == "tiny-xlmr" && (row.value("text", 0) == 50 || row.value("pair", json()) == 50)) continue;
    const Tokenizer& tok = *toks.at(row["model"].get<std::string>());
    EncodeOptions o;
    o.max_length = row["max_length"].get<size_t>();
    o.truncate = true;
    o.truncate_left = row["side"] == "left";
    TextInput in;
    if (row.contains("a")) {  // the pair tie-break rows
      in.text = row["a"].get_ref<const std::string&>();
      in.pair = std::string_view(row["b"].get_ref<const std::string&>());
      const auto lengths = row["lengths"].get<std::vector<size_t>>();
      const size_t budget = o.max_length - tok.special_tokens_added(true);
      if (lengths[0] == lengths[1] && budget % 2 == 1 && budget < lengths[0] * 2) ++odd_ties;
    } else {
      in.text = texts.at(row["text"].get<size_t>());
      if (!row["pair"].is_null()) in.pair = std::string_view(texts.at(row["pair"].get<size_t>()));
    }
    if (in.pair) ++pairs;
    const Encoding enc = tok.encode(in, o);
    EXPECT_EQ(enc.ids, row["ids"].get<std::vector<int32_t>>()) << row.dump().substr(0, 200);
    if (o.truncate_left && enc.truncated) ++left_cut;
  }
  EXPECT_GT(pairs, 500u);
  EXPECT_GT(odd_ties, 4u);  // equal sides, an odd budget: the second side keeps the extra token
  EXPECT_GT(left_cut, 100u);  // most of the left cases do cut
}

// Token offsets (TEI's /tokenize start and stop) against transformers'
// offset mapping, converted to bytes (tests/golden/tokenizers/make_offset_goldens.py),
// for the two fixtures and every folder of tests/golden/models: WordPiece,
// Unigram with a Precompiled normalizer, byte-level BPE (RoBERTa's trim
// included), Qwen2's NFC + Split + ByteLevel BPE; and the normalizers no
// golden model has (NFD, NFKC, NFKD, StripAccents, Lowercase, Strip, Replace,
// Prepend) in front of a Unigram and a byte-level BPE.
// XLM-R from sentencepiece.bpe.model takes its offsets from the pipeline
// transformers converts it to (its ids equal libsentencepiece's), except text
// 50: U+0085 (NEXT LINE) is White_Space to HF's WhitespaceSplit, which splits
// there and drops it ("▁nel"), while libsentencepiece splits on U+0020 only
// and keeps it as an unknown piece; stoke's ids are libsentencepiece's (the
// slow tokenizer's goldens), so the ids differ and its offsets are
// libsentencepiece's alignment.
const std::set<size_t> kXlmrOffsetDifferences = {50};

// A golden row's tokenizer: a fixture, a golden model folder, or
// "FOLDER+VARIANT": a tokenizer.json of tests/golden/tokenizers with the
// normalizer of offsets_normalizers.json put in.
std::unique_ptr<Tokenizer> offsets_tokenizer(const std::string& model) {
  if (model == "tiny-bert" || model == "tiny-xlmr") return load_tokenizer(test::fixture("models/" + model));
  const auto golden = std::filesystem::path(STOKE_SOURCE_DIR) / "tests" / "golden";
  const size_t plus = model.find('+');
  if (plus == std::string::npos) return load_tokenizer(golden / "models" / model);
  json spec = json::parse(read_file((golden / "tokenizers" / model.substr(0, plus) / "tokenizer.json").string()));
  const json variants = json::parse(read_file((golden / "tokenizers" / "offsets_normalizers.json").string()));
  spec["normalizer"] = variants.at(model.substr(plus + 1));
  return load_tokenizer_json(spec.dump(), model);
}

TEST(TokenizerGolden, OffsetsMatchTransformersEveryModel) {
  const auto texts = golden_texts();
  std::map<std::string, std::unique_ptr<Tokenizer>> toks;
  std::map<std::string, size_t> rows;
  for (const json& row : read_jsonl(std::filesystem::path(STOKE_SOURCE_DIR) / "tests" / "golden" / "tokenizers" /
                                    "offsets.expected.jsonl")) {
    const std::string model = row["model"].get<std::string>();
    auto& tok = toks[model];
    if (!tok) tok = offsets_tokenizer(model);
    ++rows[model];
    const size_t i = row["text"].get<size_t>();
    const std::string& text = texts.at(i);
    const auto got = tok->tokenize_with_offsets(text);
    EXPECT_TRUE(got.has_value()) << model << " text " << i;
    if (!got) continue;
    // The ids are the encode path's, always.
    EXPECT_EQ(got->ids, tok->tokenize(text)) << model << " text " << i;
    if (model == "tiny-xlmr" && kXlmrOffsetDifferences.count(i)) continue;
    EXPECT_EQ(got->ids, row["ids"].get<std::vector<int32_t>>()) << model << " text " << i;
    std::vector<std::vector<uint32_t>> offsets;
    for (const TokenOffset& o : got->offsets) offsets.push_back({o.start, o.end});
    EXPECT_EQ(offsets, row["offsets"].get<std::vector<std::vector<uint32_t>>>())
        << model << " text " << i << ": " << text.substr(0, 80);
  }
  EXPECT_EQ(rows.size(), 19u);
  for (const auto& [model, n] : rows) EXPECT_EQ(n, texts.size()) << model;
}

}  // namespace
}  // namespace stoke
