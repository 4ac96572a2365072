// SentencePiece's normalization table, as tokenizer.json's `Precompiled`
// normalizer carries it (base64 of the model's precompiled_charsmap):
//   [u32 little-endian: trie size in bytes][double-array trie units][string pool]
// The trie (darts-clone layout) maps a UTF-8 byte string to an offset in the
// pool, where the replacement text ends at a NUL. Normalizing goes one
// grapheme cluster at a time, as Hugging Face tokenizers does (see the .cc).
// Every read is bounds-checked: the blob comes from a file off the internet.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/aligned_text.h"

namespace stoke {

class PrecompiledCharsmap {
 public:
  // Throws Error(format) naming `label` when the blob is malformed.
  PrecompiledCharsmap(std::string_view blob, const std::string& label);
  static PrecompiledCharsmap from_base64(std::string_view base64, const std::string& label);

  std::string normalize(std::string_view text) const;
  // The same pass as HF's transformations list (each new character and its
  // change, see aligned_text.h); false when nothing is replaced.
  bool changes(std::string_view text, std::vector<CharChange>& out) const;
  bool empty() const { return units_.empty(); }

 private:
  // One extended grapheme cluster of text from i: its end.
  static size_t grapheme_end(std::string_view text, size_t i);
  // The replacement of the shortest prefix of `chunk` that is a key, if any.
  std::optional<std::string_view> transform(std::string_view chunk) const;

  std::vector<uint32_t> units_;
  std::string pool_;
};

// Standard base64 (RFC 4648, with padding). Throws Error(format) naming `label`.
std::string base64_decode(std::string_view text, const std::string& label);

}  // namespace stoke
