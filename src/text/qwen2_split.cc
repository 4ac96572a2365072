#include "text/qwen2_split.h"

#include "core/utf8.h"
#include "text/unicode_props.h"

namespace stoke {

const std::string_view kQwen2SplitPattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

namespace {

enum class Cls { space, letter, number, other };

Cls classify(char32_t c) {
  if (unicode::is_white_space(c)) return Cls::space;
  if (unicode::is_letter(c)) return Cls::letter;
  if (unicode::is_number(c)) return Cls::number;
  return Cls::other;
}

struct Char {
  char32_t c;
  Cls cls;
  size_t end;  // byte offset after it
};

Char char_at(std::string_view t, size_t i) {
  size_t next = i;
  const char32_t c = utf8_decode(t, next);
  return {c, classify(c), next};
}

bool is_newline(char32_t c) { return c == '\r' || c == '\n'; }

// One ASCII letter of a contraction, case-insensitively (U+017F, the long s,
// folds to s as the regex engine's case folding has it).
bool letter_is(std::string_view t, size_t i, char lower, size_t* end) {
  if (i >= t.size()) return false;
  const Char ch = char_at(t, i);
  const bool match = ch.c == static_cast<char32_t>(lower) || ch.c == static_cast<char32_t>(lower - 'a' + 'A') ||
                     (lower == 's' && ch.c == 0x17F);
  if (match) *end = ch.end;
  return match;
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at i: its end, or 0.
size_t contraction_end(std::string_view t, size_t i) {
  if (t[i] != '\'') return 0;
  size_t a = 0, b = 0;
  for (char one : {'s', 't'})
    if (letter_is(t, i + 1, one, &a)) return a;
  if (letter_is(t, i + 1, 'r', &a) && letter_is(t, a, 'e', &b)) return b;
  if (letter_is(t, i + 1, 'v', &a) && letter_is(t, a, 'e', &b)) return b;
  if (letter_is(t, i + 1, 'm', &a)) return a;
  if (letter_is(t, i + 1, 'l', &a) && letter_is(t, a, 'l', &b)) return b;
  if (letter_is(t, i + 1, 'd', &a)) return a;
  return 0;
}

// End of the run of class `cls` from i.
size_t run_end(std::string_view t, size_t i, Cls cls) {
  while (i < t.size()) {
    const Char ch = char_at(t, i);
    if (ch.cls != cls) break;
    i = ch.end;
  }
  return i;
}

// The end of the match at i (i < size): the first alternative that matches.
size_t match_end(std::string_view t, size_t i) {
  if (const size_t e = contraction_end(t, i)) return e;
  const Char c0 = char_at(t, i);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c0.cls == Cls::letter) return run_end(t, c0.end, Cls::letter);
  if (!is_newline(c0.c) && c0.cls != Cls::number && c0.end < t.size() && char_at(t, c0.end).cls == Cls::letter)
    return run_end(t, c0.end, Cls::letter);
  // \p{N}: one character
  if (c0.cls == Cls::number) return c0.end;
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  size_t start = i;
  if (c0.c == ' ' && c0.end < t.size() && char_at(t, c0.end).cls == Cls::other) start = c0.end;
  if (char_at(t, start).cls == Cls::other) {
    size_t e = run_end(t, start, Cls::other);
    while (e < t.size() && (t[e] == '\r' || t[e] == '\n')) ++e;
    return e;
  }
  // c0 is whitespace from here on.
  const size_t ws_end = run_end(t, i, Cls::space);
  // \s*[\r\n]+: up to the last \r or \n of the whitespace run.
  size_t last_newline_end = 0;
  for (size_t k = i; k < ws_end;) {
    const Char ch = char_at(t, k);
    if (is_newline(ch.c)) last_newline_end = ch.end;
    k = ch.end;
  }
  if (last_newline_end) return last_newline_end;
  // \s+(?!\S): the run but its last character when a non-space follows; else \s+.
  if (ws_end == t.size()) return ws_end;
  size_t last = ws_end - 1;  // start of the run's last character
  while (last > i && (static_cast<unsigned char>(t[last]) & 0xC0) == 0x80) --last;
  return last > i ? last : ws_end;
}

}  // namespace

void qwen2_split(std::string_view text, std::vector<std::string_view>& out) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t end = match_end(text, i);
    out.push_back(text.substr(i, end - i));
    i = end;
  }
}

}  // namespace stoke
