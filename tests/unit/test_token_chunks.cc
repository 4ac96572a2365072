// Token-exact chunking (text/token_chunks.h): windows of N tokens that
// overlap by exactly M, cuts moved back to boundaries, and spans that cut
// the chunk's text out of the original — on every tokenizer family.
#include "text/token_chunks.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/utf8.h"
#include "support/fixtures.h"
#include "support/jsonl.h"
#include "text/tokenizer.h"
#include "text/tokenizer_loader.h"

namespace stoke {
namespace {

using json = nlohmann::json;

// One token per word of a space-separated text, with its byte offsets.
std::vector<TokenOffset> word_offsets(const std::string& text) {
  std::vector<TokenOffset> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n')) ++i;
    if (i == text.size()) break;
    const size_t b = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\n') ++i;
    out.push_back({static_cast<uint32_t>(b), static_cast<uint32_t>(i)});
  }
  return out;
}

// The invariants every chunking holds: chunks in order, each at most N
// tokens, neighbours sharing exactly M, the first at token 0 and the last at
// the end (so no token is lost and none doubled beyond the overlap).
void expect_windows(const std::vector<TokenChunk>& chunks, size_t n, const ChunkSettings& s) {
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.front().token_begin, 0u);
  EXPECT_EQ(chunks.back().token_end, n);
  for (size_t k = 0; k < chunks.size(); ++k) {
    EXPECT_LE(chunks[k].token_end - chunks[k].token_begin, static_cast<uint32_t>(s.tokens)) << k;
    if (n > 0) {
      EXPECT_LT(chunks[k].token_begin, chunks[k].token_end) << k;
    }
    if (k > 0) {
      EXPECT_EQ(chunks[k].token_begin, chunks[k - 1].token_end - static_cast<uint32_t>(s.overlap)) << k;
      EXPECT_GT(chunks[k].token_begin, chunks[k - 1].token_begin) << k;
    }
  }
}

TEST(TokenChunks, WindowsOverlapByExactlyM) {
  std::string text;
  for (int i = 0; i < 23; ++i) text += (i ? " w" : "w") + std::to_string(i);
  const auto offsets = word_offsets(text);
  for (int64_t N : {1, 2, 5, 8, 23, 40})
    for (int64_t M : {0, 1, 3})
      if (M < N) {
        ChunkSettings s{N, M, ChunkBoundary::none};
        const auto chunks = cut_chunks(text, offsets, s);
        expect_windows(chunks, offsets.size(), s);
        if (M == 0 && N == 5) {
          ASSERT_EQ(chunks.size(), 5u);
          EXPECT_EQ(text.substr(chunks[1].byte_begin, chunks[1].byte_end - chunks[1].byte_begin), "w5 w6 w7 w8 w9");
        }
      }
}

TEST(TokenChunks, EmptyTextIsOneEmptyChunk) {
  const auto chunks = cut_chunks("", {}, ChunkSettings{4, 1, ChunkBoundary::sentence});
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0], TokenChunk{});
}

TEST(TokenChunks, CutsMoveBackToTheStrongestBoundaryAsked) {
  const std::string text = "One two three. Four five six seven.\n\nEight nine ten eleven twelve. Thirteen";
  const auto offsets = word_offsets(text);  // "three." and "seven." are one token each
  auto pieces = [&](ChunkBoundary b, int64_t N) {
    std::vector<std::string> out;
    for (const TokenChunk& c : cut_chunks(text, offsets, ChunkSettings{N, 0, b}))
      out.push_back(text.substr(c.byte_begin, c.byte_end - c.byte_begin));
    return out;
  };
  EXPECT_EQ(pieces(ChunkBoundary::sentence, 5),
            (std::vector<std::string>{"One two three.", "Four five six seven.", "Eight nine ten eleven twelve.",
                                      "Thirteen"}));
  EXPECT_EQ(pieces(ChunkBoundary::paragraph, 9),
            (std::vector<std::string>{"One two three. Four five six seven.", "Eight nine ten eleven twelve. Thirteen"}));
  // No sentence end in reach: the cut falls back to a word start, then to the window's end.
  EXPECT_EQ(pieces(ChunkBoundary::sentence, 2).front(), "One two");
}

TEST(TokenChunks, SentenceEndsPerScript) {
  // Each text is two "sentences" of single-token words; the cut before the
  // second must be a sentence boundary and the one before the first
  // sentence's last word must not.
  struct Case {
    std::string text;
    bool cjk;
  };
  for (const Case& c : {Case{"Hola mundo! Adiós amigo", false}, Case{"Он сказал: «да». Потом ушёл", false},
                        Case{"यह वाक्य है। दूसरा वाक्य", false}, Case{"هل أنت هنا؟ نعم", false},
                        Case{"He said \"stop.\" Then left", false}}) {
    const auto offsets = word_offsets(c.text);
    size_t boundaries = 0;
    for (size_t t = 1; t < offsets.size(); ++t)
      boundaries += is_chunk_boundary(c.text, offsets, t, ChunkBoundary::sentence) ? 1 : 0;
    EXPECT_EQ(boundaries, 1u) << c.text;
  }
  // CJK: one token per character, no spaces; 。ends a sentence without one.
  const std::string cjk = "今天下雨。明天晴";
  std::vector<TokenOffset> chars;
  for (size_t i = 0; i < cjk.size();) {
    const size_t b = i;
    utf8_decode(cjk, i);
    chars.push_back({static_cast<uint32_t>(b), static_cast<uint32_t>(i)});
  }
  for (size_t t = 1; t < chars.size(); ++t) {
    EXPECT_EQ(is_chunk_boundary(cjk, chars, t, ChunkBoundary::sentence), t == 5) << t;
    EXPECT_TRUE(is_chunk_boundary(cjk, chars, t, ChunkBoundary::word)) << t;  // every ideograph is a word
  }
}

TEST(TokenChunks, SettingsAreChecked) {
  EXPECT_THROW(check_chunk_settings(ChunkSettings{0, 0}), Error);
  EXPECT_THROW(check_chunk_settings(ChunkSettings{4, 4}), Error);
  EXPECT_THROW(check_chunk_settings(ChunkSettings{4, -1}), Error);
  EXPECT_NO_THROW(check_chunk_settings(ChunkSettings{4, 3}));
}

// Every tokenizer family stoke has: WordPiece (BERT, lowercasing,
// DistilBERT, ELECTRA, MPNet), SentencePiece (XLM-R, CamemBERT), byte-level
// BPE (RoBERTa, ModernBERT, Qwen).
std::vector<std::pair<std::string, std::unique_ptr<Tokenizer>>> every_family() {
  std::vector<std::pair<std::string, std::unique_ptr<Tokenizer>>> out;
  out.emplace_back("tiny-bert", load_tokenizer(test::fixture("models/tiny-bert")));
  out.emplace_back("tiny-xlmr", load_tokenizer(test::fixture("models/tiny-xlmr")));
  const auto golden = std::filesystem::path(STOKE_SOURCE_DIR) / "tests" / "golden" / "models";
  for (const char* m : {"tiny-roberta", "tiny-camembert", "tiny-mpnet", "tiny-modernbert", "tiny-qwen2", "tiny-electra"})
    out.emplace_back(m, load_tokenizer(golden / m));
  return out;
}

// A document of the golden texts (many scripts, combining marks, text that
// normalization changes) joined by spaces, sentence ends and blank lines.
std::string golden_document() {
  std::string doc;
  size_t i = 0;
  for (const json& row : test::read_jsonl(test::fixture("golden/texts.jsonl"))) {
    const std::string t = row["text"].get<std::string>();
    if (t.empty()) continue;
    doc += t;
    doc += (++i % 5 == 0) ? "\n\n" : (i % 2 ? ". " : " ");
  }
  return doc;
}

TEST(TokenChunks, SpansCutTheChunksTextOutOfTheOriginalOnEveryFamily) {
  const std::string doc = golden_document();
  for (const auto& [name, tok] : every_family()) {
    std::string why;
    const auto tokens = tokenize_document(*tok, "", doc, &why);
    ASSERT_TRUE(tokens) << name << ": " << why;
    EXPECT_EQ(tokens->ids, tok->tokenize(doc)) << name;
    const auto& offsets = tokens->offsets;
    // A chunk edge at whitespace between two words: there the span's text
    // alone must give the chunk's ids.
    auto at_space = [&](size_t t) {
      return t == 0 || t == offsets.size() ||
             (is_chunk_boundary(doc, offsets, t, ChunkBoundary::word) &&
              std::isspace(static_cast<unsigned char>(doc[offsets[t - 1].end])));
    };
    for (ChunkBoundary b : {ChunkBoundary::none, ChunkBoundary::word, ChunkBoundary::sentence})
      for (int64_t overlap : {0, 8}) {
        const ChunkSettings s{48, overlap, b};
        const auto chunks = cut_chunks(doc, offsets, s, tokens->leading_space);
        expect_windows(chunks, tokens->ids.size(), s);
        size_t checked = 0, tied = 0;
        for (size_t k = 0; k < chunks.size(); ++k) {
          const TokenChunk& c = chunks[k];
          const std::string span = doc.substr(c.byte_begin, c.byte_end - c.byte_begin);
          // Character spans are the byte spans counted in code points.
          EXPECT_EQ(c.char_begin, utf8_length(doc.substr(0, c.byte_begin))) << name << " chunk " << k;
          EXPECT_EQ(c.char_end - c.char_begin, utf8_length(span)) << name << " chunk " << k;
          if (!at_space(c.token_begin) || !at_space(c.token_end)) continue;
          ++checked;
          const std::vector<int32_t> want(tokens->ids.begin() + c.token_begin, tokens->ids.begin() + c.token_end);
          if (name == "tiny-xlmr" && tok->tokenize(span) != want) {
            ++tied;
            continue;
          }
          EXPECT_EQ(tok->tokenize(span), want) << name << " boundary " << chunk_boundary_name(b) << " chunk " << k
                                               << ": [" << span.substr(0, 60) << "]";
        }
        // Debian's libsentencepiece (0.1.97) breaks ties between equal-score
        // BPE merges by where they are in the whole text, so one word of the
        // tiny XLM-R ("$1,000.50": "0" "00" in the document, "00" "0" alone;
        // pip's 0.2 gives "0" "00" both ways) segments differently alone;
        // the chunk keeps the ids the document gave.
        EXPECT_LE(tied * 50, chunks.size()) << name;
        // Without overlap, cuts at word starts put most chunks' both edges
        // at whitespace (the rest fell back where no word start was in
        // reach: CJK runs without spaces on non-WordPiece tokenizers).
        if (b != ChunkBoundary::none && overlap == 0) {
          EXPECT_GT(checked * 2, chunks.size()) << name;
        }
      }
  }
}

TEST(TokenChunks, PromptTokensAreSplitOffAndLongTextsKeepTheirIds) {
  std::string doc;
  while (doc.size() < 3 * kMinPrefixBytes) doc += "Long documents are cut into pieces at whitespace. ";
  doc.pop_back();
  for (const auto& [name, tok] : every_family()) {
    std::string why;
    const auto tokens = tokenize_document(*tok, "query: ", doc, &why);
    ASSERT_TRUE(tokens) << name << ": " << why;
    EXPECT_FALSE(tokens->prompt_ids.empty()) << name;
    std::vector<int32_t> all = tokens->prompt_ids;
    all.insert(all.end(), tokens->ids.begin(), tokens->ids.end());
    EXPECT_EQ(all, tok->tokenize("query: " + doc)) << name;
    ASSERT_EQ(tokens->offsets.size(), tokens->ids.size());
    EXPECT_LE(tokens->offsets.back().end, doc.size());
    EXPECT_EQ(doc.substr(tokens->offsets.back().start, 1), ".") << name;
  }
}

}  // namespace
}  // namespace stoke
