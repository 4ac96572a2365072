// UTF-8 decoding with replacement. Texts come from messy files: every invalid
// sequence becomes U+FFFD (one per maximal invalid subpart, as Python's
// bytes.decode(errors="replace") and the WHATWG decoder do) and is counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace stoke {

constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes one code point at s[i]; advances i. Invalid input yields U+FFFD and
// sets *invalid (i then advances past the maximal invalid subpart, at least 1 byte).
char32_t utf8_decode(std::string_view s, size_t& i, bool* invalid = nullptr);
// Appends the UTF-8 encoding of cp (cp must be a valid scalar value).
void utf8_append(std::string& out, char32_t cp);
// True when s is entirely valid UTF-8 (no surrogates, no overlongs, <= U+10FFFF).
bool utf8_is_valid(std::string_view s);
// Returns s with every invalid subpart replaced by U+FFFD; *replaced counts them.
std::string utf8_sanitize(std::string_view s, size_t* replaced = nullptr);
// Number of code points (valid input assumed; invalid subparts count one each).
size_t utf8_length(std::string_view s);

}  // namespace stoke
