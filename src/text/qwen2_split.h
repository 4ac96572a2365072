// The Split pre-tokenizer of Qwen2 / Qwen3 tokenizers (tokenizer.json
// "pre_tokenizer": Sequence[Split(Regex, "Isolated"), ByteLevel(use_regex:
// false)]), whose regex is
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
//    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// written by hand over the same Unicode classes as GPT-2's pattern
// (byte_level.h): one left-to-right pass, linear in the text, no regex library.
// Only this exact pattern is run; the loader refuses any other by name.
#pragma once

#include <string_view>
#include <vector>

namespace stoke {

// The pattern as tokenizer.json spells it (Split's "pattern": {"Regex": ...}).
extern const std::string_view kQwen2SplitPattern;

// Appends to `out` the pieces of `text` (valid UTF-8) the pattern matches,
// each isolated (every byte in exactly one piece, in order).
void qwen2_split(std::string_view text, std::vector<std::string_view>& out);

}  // namespace stoke
