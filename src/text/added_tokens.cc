#include "text/added_tokens.h"

#include <algorithm>

#include "core/utf8.h"
#include "text/unicode_props.h"

namespace stoke {

namespace {

// Rust's trim of char::is_whitespace, as tokenizers' lstrip/rstrip use.
std::string_view strip_right(std::string_view s) {
  while (!s.empty()) {
    // Step back to the start of the last code point.
    size_t start = s.size() - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    char32_t cp = utf8_decode(s, i);
    if (!unicode::is_white_space(cp)) break;
    s.remove_suffix(s.size() - start);
  }
  return s;
}

std::string_view strip_left(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t next = i;
    char32_t cp = utf8_decode(s, next);
    if (!unicode::is_white_space(cp)) break;
    i = next;
  }
  return s.substr(i);
}

// A word character for single_word matching: regex \w (tokenizers tests
// the text before the token with \w$ and after it with ^\w).
bool is_word_char_before(std::string_view text, size_t pos) {
  if (pos == 0) return false;
  size_t start = pos - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  size_t i = start;
  return unicode::is_regex_word(utf8_decode(text, i));
}

bool is_word_char_at(std::string_view text, size_t pos) {
  if (pos >= text.size()) return false;
  size_t i = pos;
  return unicode::is_regex_word(utf8_decode(text, i));
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  // Empty contents can never match; drop them rather than loop on them.
  tokens_.erase(std::remove_if(tokens_.begin(), tokens_.end(), [](const AddedToken& t) { return t.content.empty(); }),
                tokens_.end());
  for (size_t k = 0; k < tokens_.size(); ++k)
    by_first_byte_[static_cast<unsigned char>(tokens_[k].content[0])].push_back(static_cast<uint32_t>(k));
}

int AddedTokenMatcher::longest_match_at(std::string_view text, size_t pos) const {
  int best = -1;
  size_t best_len = 0;
  const std::string_view rest = text.substr(pos);
  // Only the tokens starting with this byte are compared: bounded work per
  // position (the added tokens are fixed), so the split is linear in the text.
  for (uint32_t k : by_first_byte_[static_cast<unsigned char>(rest[0])]) {
    const std::string& c = tokens_[k].content;
    if (c.size() > best_len && rest.size() >= c.size() && rest.compare(0, c.size(), c) == 0) {
      best = static_cast<int>(k);
      best_len = c.size();
    }
  }
  return best;
}

std::vector<TextSpan> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<TextSpan> spans;
  if (tokens_.empty()) {
    if (!text.empty()) spans.push_back({text, -1});
    return spans;
  }
  size_t plain_start = 0;
  bool strip_next_left = false;  // the previous token had rstrip
  auto push_plain = [&](std::string_view s, bool strip_right_side) {
    if (strip_next_left) s = strip_left(s);
    if (strip_right_side) s = strip_right(s);
    if (!s.empty()) spans.push_back({s, -1});
  };
  size_t pos = 0;
  while (pos < text.size()) {
    if (by_first_byte_[static_cast<unsigned char>(text[pos])].empty()) {
      ++pos;
      continue;
    }
    const int k = longest_match_at(text, pos);
    if (k < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[static_cast<size_t>(k)];
    if (tok.single_word && (is_word_char_before(text, pos) || is_word_char_at(text, pos + tok.content.size()))) {
      // Inside a word: HF tokenizers drops this leftmost-longest match and
      // goes on after it — a shorter token at the same place is not tried,
      // nor one that starts inside it. The match stays plain text.
      pos += tok.content.size();
      continue;
    }
    push_plain(text.substr(plain_start, pos - plain_start), tok.lstrip);
    spans.push_back({std::string_view(text.data() + pos, tok.content.size()), tok.id});
    strip_next_left = tok.rstrip;
    pos += tok.content.size();
    plain_start = pos;
  }
  push_plain(text.substr(plain_start), false);
  return spans;
}

}  // namespace stoke
