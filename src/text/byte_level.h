// GPT-2's byte-level machinery (RoBERTa, and later ModernBERT and Qwen):
// every byte is shown as a printable character (the byte<->unicode map, so a
// BPE vocabulary of strings covers all byte sequences), and the text is split
// with GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// here written by hand over utf8proc's Unicode classes (no regex library):
// one left-to-right pass, linear in the text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace stoke {

// The GPT-2 character standing for byte b (as UTF-8).
const std::string& byte_level_char(unsigned char b);
// The bytes mapped to their characters.
std::string byte_level_encode(std::string_view bytes);

// Appends to `out` the pieces of `text` (valid UTF-8) as the pattern splits it
// (every byte lands in exactly one piece, in order).
void gpt2_split(std::string_view text, std::vector<std::string_view>& out);

}  // namespace stoke
