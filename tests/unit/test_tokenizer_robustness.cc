// RELIABILITY.md item 3: hostile text never crashes a tokenizer, every id is
// inside the vocabulary, over-long words become [UNK], and the work stays
// linear in the input. Linearity is checked by counting vocabulary lookups,
// not by timing.
#include <gtest/gtest.h>

#include <random>

#include <sentencepiece_processor.h>

#include "core/error.h"
#include "core/utf8.h"
#include "support/fixtures.h"
#include "text/added_tokens.h"
#include "text/tokenizer_loader.h"
#include "text/wordpiece.h"

namespace stoke {
namespace {

std::unique_ptr<Tokenizer> bert() { return load_tokenizer(test::fixture("models/tiny-bert")); }
std::unique_ptr<Tokenizer> xlmr() { return load_tokenizer(test::fixture("models/tiny-xlmr")); }

std::string repeat(std::string_view unit, size_t bytes) {
  std::string s;
  s.reserve(bytes + unit.size());
  while (s.size() < bytes) s.append(unit);
  return s;
}

void expect_ids_in_vocab(const Tokenizer& tok, const std::string& text, const char* what) {
  const Encoding enc = tok.encode(text, EncodeOptions{0, false});
  ASSERT_GE(enc.ids.size(), 2u) << what;
  for (int32_t id : enc.ids) {
    ASSERT_GE(id, 0) << what;
    ASSERT_LT(id, tok.vocab_size()) << what;
  }
}

TEST(Utf8, ReplacesEachMaximalInvalidSubpart) {
  size_t replaced = 0;
  // Lone surrogate ED A0 80: ED cannot be followed by A0, so 3 subparts.
  EXPECT_EQ(utf8_sanitize("a\xED\xA0\x80z", &replaced), "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz");
  EXPECT_EQ(replaced, 3u);
  // A truncated 3-byte sequence is one subpart.
  EXPECT_EQ(utf8_sanitize("\xE2\x82", &replaced), "\xEF\xBF\xBD");
  EXPECT_EQ(replaced, 1u);
  // Overlong encodings and bytes that never start a sequence.
  EXPECT_EQ(utf8_sanitize("\xC0\xAF\xFF", &replaced), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(replaced, 3u);
  EXPECT_EQ(utf8_sanitize("ok \xC3\xA9", &replaced), "ok \xC3\xA9");
  EXPECT_EQ(replaced, 0u);
  EXPECT_FALSE(utf8_is_valid("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_TRUE(utf8_is_valid("\xF4\x8F\xBF\xBF"));
}

TEST(TokenizerRobustness, InvalidUtf8IsReplacedAndCounted) {
  for (auto& tok : {bert(), xlmr()}) {
    EncodeStats stats;
    const Encoding enc = tok->encode(std::string("caf\xC3 \xFF\xFE ok \xED\xA0\x80"), EncodeOptions{}, &stats);
    EXPECT_EQ(stats.replaced_utf8, 6u);  // C3, FF, FE, ED, A0, 80
    for (int32_t id : enc.ids) EXPECT_LT(id, tok->vocab_size());
  }
  // BERT's clean_text drops U+FFFD, so the bad bytes vanish entirely.
  auto b = bert();
  EXPECT_EQ(b->encode(std::string("ok\xFF")).ids, b->encode("ok").ids);
}

TEST(TokenizerRobustness, NulAndControlCharacters) {
  auto b = bert();
  EXPECT_EQ(b->encode(std::string("he\0llo", 6)).ids, b->encode("hello").ids);
  expect_ids_in_vocab(*xlmr(), std::string("a\0b\x01\x7f", 5), "xlmr controls");
}

TEST(TokenizerRobustness, EmptyAndWhitespaceTextsGiveSpecialsOnly) {
  auto b = bert();
  EXPECT_EQ(b->encode("").ids, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(b->encode(" \t\n\u3000").ids, (std::vector<int32_t>{2, 3}));
  auto x = xlmr();
  EXPECT_EQ(x->encode("").ids, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(x->encode("   ").ids, (std::vector<int32_t>{0, 2}));
}

TEST(TokenizerRobustness, TenThousandCombiningMarks) {
  std::string text = "e";
  for (int i = 0; i < 10000; ++i) text += "\xCC\x81";  // U+0301
  auto b = bert();
  // Uncased BERT strips accents: the word is just "e".
  EXPECT_EQ(b->encode(text).ids, b->encode("e").ids);
  expect_ids_in_vocab(*xlmr(), text, "xlmr combining marks");
  // A megabyte of them (and of alternating ones, "Zalgo" text) stays fast:
  // SentencePiece alone is quadratic here.
  const std::string zalgo = "a" + repeat("\xCC\x81\xCC\x80\xCD\x9C\xCC\xA3", 1 << 20);
  for (auto& tok : {bert(), xlmr()}) {
    expect_ids_in_vocab(*tok, "e" + repeat("\xCC\x81", 1 << 20), "1 MB combining marks");
    expect_ids_in_vocab(*tok, zalgo, "1 MB zalgo");
  }
}

TEST(TokenizerRobustness, LongWordsBecomeUnknown) {
  auto b = bert();
  const std::string word100(100, 'a'), word101(101, 'a');
  // 100 characters is the limit: still split into pieces; 101 is one [UNK].
  const auto ids100 = b->encode(word100).ids;
  EXPECT_GT(ids100.size(), 3u);
  EXPECT_EQ(b->encode(word101).ids, (std::vector<int32_t>{2, 1, 3}));
  const std::string megabyte_word = repeat("abcdefghij", 1 << 20);
  EXPECT_EQ(b->encode(megabyte_word).ids, (std::vector<int32_t>{2, 1, 3}));
  expect_ids_in_vocab(*xlmr(), megabyte_word, "xlmr 1 MB word");
}

TEST(TokenizerRobustness, MegabyteOfEmojiAndCjk) {
  const std::string emoji = repeat("\xF0\x9F\x8D\x95\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9", 1 << 20);
  const std::string cjk = repeat("\xE6\x88\x91\xE7\x88\xB1\xE8\x87\xAA\xE7\x84\xB6", 1 << 20);
  for (auto& tok : {bert(), xlmr()}) {
    expect_ids_in_vocab(*tok, emoji, "1 MB emoji");
    expect_ids_in_vocab(*tok, cjk, "1 MB CJK");
  }
  // Each CJK ideograph is its own word in BERT: one id per character.
  auto b = bert();
  EXPECT_EQ(b->encode(cjk).ids.size(), utf8_length(cjk) + 2);
}

TEST(TokenizerRobustness, RandomBytesNeverEscapeTheVocabulary) {
  std::mt19937 rng(7);
  auto b = bert();
  auto x = xlmr();
  for (int round = 0; round < 200; ++round) {
    std::string text(rng() % 300, '\0');
    for (auto& c : text) c = static_cast<char>(rng() % 256);
    expect_ids_in_vocab(*b, text, "random bytes bert");
    expect_ids_in_vocab(*x, text, "random bytes xlmr");
  }
}

// Lookups per input byte must not grow with the input: the same ratio for
// 16 KB and 1 MB of text, for ordinary text and for an adversarial vocabulary
// whose long token makes every greedy match walk far and fail.
double lookups_per_byte(const Tokenizer& tok, const std::string& text) {
  EncodeStats stats;
  tok.encode(text, EncodeOptions{0, false}, &stats);
  return static_cast<double>(stats.lookups) / static_cast<double>(text.size());
}

TEST(TokenizerRobustness, WorkIsLinearInTheInput) {
  auto b = bert();
  const std::string unit = "The quick brown fox, naïve café, 東京タワー & déjà-vu! ";
  const double small = lookups_per_byte(*b, repeat(unit, 16 << 10));
  const double large = lookups_per_byte(*b, repeat(unit, 1 << 20));
  EXPECT_GT(small, 0.0);
  EXPECT_NEAR(large / small, 1.0, 0.05);

  // Adversarial: "a" pieces plus one 60-character token that almost matches.
  std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "##a"};
  vocab.push_back(std::string(59, 'a') + "b");
  vocab.push_back("##" + std::string(59, 'a') + "b");
  auto model = std::make_unique<WordPieceModel>(vocab, BertNormalizerOptions{}, WordPieceOptions{});
  PostProcessor none;
  none.single = {TemplatePiece{true, 0, {}, 0}};
  Tokenizer adversarial(TokenizerKind::wordpiece, std::move(model), AddedTokenMatcher(), none, 0, 1);
  const std::string word = std::string(99, 'a') + " ";
  const double adv_small = lookups_per_byte(adversarial, repeat(word, 16 << 10));
  const double adv_large = lookups_per_byte(adversarial, repeat(word, 1 << 20));
  EXPECT_NEAR(adv_large / adv_small, 1.0, 0.05);
  // Each greedy step walks at most the longest token (60 bytes) past its start.
  EXPECT_LE(adv_large, 61.0);
}

TEST(TokenizerRobustness, AddedTokenMatchingIsLinear) {
  auto b = bert();
  // Every position starts like "[CLS]" but never completes it.
  const std::string text = repeat("[CL[SE[MAS", 1 << 20);
  const Encoding enc = b->encode(text, EncodeOptions{0, false});
  for (int32_t id : enc.ids) EXPECT_LT(id, b->vocab_size());
}

// single_word inside a word: HF tokenizers (0.23, checked with its Python
// package) drops the leftmost-longest match and goes on after it, so "xab"
// stays one plain span, not "x" + the shorter added token "a" + "b".
TEST(AddedTokens, SingleWordMatchInsideAWordIsDroppedNotShortened) {
  AddedToken ab{"ab", 10};
  ab.single_word = true;
  const AddedTokenMatcher m({ab, AddedToken{"a", 11}});
  auto spans = [&](std::string_view text) {
    std::vector<std::pair<std::string, int32_t>> out;
    for (const TextSpan& s : m.split(text)) out.emplace_back(std::string(s.text), s.token_id);
    return out;
  };
  using Spans = std::vector<std::pair<std::string, int32_t>>;
  EXPECT_EQ(spans("xab"), (Spans{{"xab", -1}}));
  EXPECT_EQ(spans("ab"), (Spans{{"ab", 10}}));
  EXPECT_EQ(spans("x ab"), (Spans{{"x ", -1}, {"ab", 10}}));
  EXPECT_EQ(spans("xa"), (Spans{{"x", -1}, {"a", 11}}));
  EXPECT_EQ(spans("abx"), (Spans{{"abx", -1}}));
  EXPECT_EQ(spans("xaby a"), (Spans{{"xaby ", -1}, {"a", 11}}));
}

TEST(TokenizerRobustness, TruncationCountsAndKeepsTheSpecials) {
  auto b = bert();
  EncodeStats stats;
  const Encoding enc = b->encode(repeat("word ", 5000), EncodeOptions{16, true}, &stats);
  EXPECT_EQ(enc.ids.size(), 16u);
  EXPECT_TRUE(enc.truncated);
  EXPECT_EQ(stats.truncated, 1u);
  EXPECT_EQ(enc.ids.front(), 2);
  EXPECT_EQ(enc.ids.back(), 3);
  EXPECT_THROW(b->encode(TextInput{"a", std::string_view("b")}, EncodeOptions{2, true}), Error);
  // Pairs: longest_first cuts the longer side first, then alternates.
  const Encoding pair = b->encode(TextInput{"a a a a a a a a", std::string_view("b b")}, EncodeOptions{8, true});
  EXPECT_EQ(pair.ids.size(), 8u);
  EXPECT_EQ(pair.type_ids, (std::vector<int32_t>{0, 0, 0, 0, 0, 1, 1, 1}));
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

// Shortening runs of unknown characters (SentencePiece is quadratic on them)
// must give exactly the ids the unmodified library gives.
TEST(TokenizerRobustness, ShortenedUnknownRunsGiveTheLibrarysIds) {
  sentencepiece::SentencePieceProcessor raw;
  ASSERT_TRUE(raw.Load(test::fixture("models/tiny-xlmr/sentencepiece.bpe.model").string()).ok());
  auto x = xlmr();
  const std::vector<std::string> texts = {
      "I love " + repeat("\xF0\x9F\x8D\x95", 4 * 300) + " pizza",
      repeat("\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xEF\xB8\x8F", 14 * 200) + "end",
      "\xCE\xB1\xCE\xB2" + repeat("\xCE\xB3\xCE\xB4 ", 4 * 100) + repeat("\xCE\xB1", 2 * 500) + "x",
      repeat("\xE2\x80\x8B\xF0\x9F\x8D\x95", 7 * 200),  // zero-width spaces become spaces
      repeat("\xEA\xB0\x80\xF0\x9F\x8D\x95", 7 * 200),  // Hangul: never dropped
      "e" + repeat("\xCC\x81", 2 * 400) + " x",             // one mark repeated
      "a" + repeat("\xCC\x81\xCC\x80\xCC\xA3", 6 * 150),    // marks of two classes, reordered by NFKC
      "u" + repeat("\xCC\x88\xCC\x84", 4 * 150) + "o",        // u + diaeresis + macron composes
      repeat("\xF0\x9F\x8D\x95", 4 * 100) + "\xCC\xA3" + repeat("\xF0\x9F\x8D\x95", 4 * 100) + "\xCC\x81z",
  };
  for (const auto& text : texts) {
    std::vector<int> spm_ids;
    ASSERT_TRUE(raw.Encode(text, &spm_ids).ok());
    std::vector<int32_t> want = {0};
    for (int id : spm_ids) want.push_back(id == 0 ? 3 : id + 1);
    want.push_back(2);
    EXPECT_EQ(x->encode(text, EncodeOptions{0, false}).ids, want) << text.substr(0, 40);
  }
}

}  // namespace
}  // namespace stoke
