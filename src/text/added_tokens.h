// Added tokens inside a text ("[CLS]", "<mask>", tokens added after
// training) become their ids, as Hugging Face tokenizers' added vocabulary
// does: the text is split at the leftmost-longest occurrence of any added
// token, the spans between them go through the subword model, and tokens with
// lstrip/rstrip eat the whitespace (Unicode White_Space) on that side;
// single_word tokens match only between non-word characters (regex \w).
// Matching is exact (case-sensitive) and linear in the text. A matcher holds
// one kind: tokens with normalized: false are matched on the raw text, those
// with normalized: true (by another matcher, on their normalized content) on
// the normalized spans between them — the Tokenizer runs both.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stoke {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool lstrip = false;       // strip whitespace on its left
  bool rstrip = false;       // strip whitespace on its right
  bool single_word = false;  // match only when not inside a word
  bool special = true;
  bool normalized = false;   // matched on normalized text (tokenizer.json's "normalized")
  // Offsets only: whether the range of a match covers the whitespace it
  // strips (HF). False for a special token given as a plain string beside a
  // slow tokenizer's files: transformers 5 builds it without lstrip/rstrip
  // (the ids are the same either way; the ranges are not).
  bool strip_in_offsets = true;
};

// One piece of a split text: plain text (token_id < 0) or an added token.
struct TextSpan {
  std::string_view text;
  int32_t token_id = -1;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  // Splits text into spans; empty plain spans (after stripping) are dropped.
  std::vector<TextSpan> split(std::string_view text) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }

 private:
  // Longest token matching at text[pos], or -1 (index into tokens_).
  int longest_match_at(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  std::vector<uint32_t> by_first_byte_[256];  // indices into tokens_, by content[0]
};

}  // namespace stoke
