// A text with, for each of its bytes, the bytes of the original text it came
// from: what Hugging Face tokenizers' NormalizedString carries so that a
// token found in normalized, pre-tokenized text gets its range in the text
// the user sent (TEI's /tokenize start and stop). Only built when offsets are
// asked for; the encode path never pays for it.
//
// Every change is expressed as HF's `transform`: the new characters in order,
// each with a change (0: it replaces the next old character; 1: it is
// inserted; -n: it replaces the next old character and n more are removed).
// A replacing character takes the alignment of the old character it
// replaces, an inserted one that of the old byte before it. Following that
// rule, quirks included, is what makes the ranges equal HF's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stoke {

// Where a token came from: bytes [start, end) of the text given to the model.
struct TokenOffset {
  uint32_t start = 0, end = 0;
  bool operator==(const TokenOffset&) const = default;
};

// A new character and its change (see above).
struct CharChange {
  char32_t c;
  int change;
};

struct AlignedText {
  std::string text;
  std::vector<TokenOffset> align;  // one per byte of text: its original range (a whole character)

  // The text as its own original: each byte maps to its character's range.
  static AlignedText identity(std::string_view original);
  // HF's transform over the whole text: `initial_offset` old characters are
  // removed first, then `dest` is applied; old characters left over are removed.
  void transform(const std::vector<CharChange>& dest, size_t initial_offset = 0);
  // The original range of text bytes [begin, end) (begin < end): from the
  // first byte's start to the last byte's end, as HF's convert_offsets.
  TokenOffset original(size_t begin, size_t end) const;
  // HF's prepend: the first new character replaces the text's first
  // character, the rest and that character are inserted after it: all take
  // its alignment. Nothing on an empty text.
  void prepend(std::string_view content);
  // HF's replace of every `pattern` (a plain string, left to right): the
  // match is removed and `content` inserted, each new byte with the
  // alignment of the match's last byte.
  void replace_all(std::string_view pattern, std::string_view content);
  // Bytes [begin, end) with their alignment (character boundaries).
  AlignedText slice(size_t begin, size_t end) const;
};

// The characters of `text` (valid UTF-8), each with change 0.
std::vector<CharChange> unchanged_chars(std::string_view text);

}  // namespace stoke
