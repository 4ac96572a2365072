#include "text/byte_level.h"

#include <array>

#include "core/utf8.h"
#include "text/unicode_props.h"

namespace stoke {

namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves,
// the other 68 bytes take the code points 256, 257, ... in byte order.
struct ByteTable {
  std::array<std::string, 256> chars;
  ByteTable() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      utf8_append(chars[static_cast<size_t>(b)], printable ? static_cast<char32_t>(b) : next++);
    }
  }
};
const ByteTable kBytes;

enum class CharClass { space, letter, number, other };

CharClass classify(char32_t c) {
  if (unicode::is_white_space(c)) return CharClass::space;
  if (unicode::is_letter(c)) return CharClass::letter;
  if (unicode::is_number(c)) return CharClass::number;
  return CharClass::other;
}

// The class and end of the character at i (i < text.size()).
CharClass class_at(std::string_view text, size_t i, size_t* next) {
  *next = i;
  return classify(utf8_decode(text, *next));
}

// Length of 's 't 're 've 'm 'll 'd at i, or 0.
size_t contraction_at(std::string_view t, size_t i) {
  if (t[i] != '\'' || i + 1 >= t.size()) return 0;
  const char a = t[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 < t.size()) {
    const char b = t[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  return 0;
}

// End of the run of characters of class `cls` starting at i.
size_t run_end(std::string_view text, size_t i, CharClass cls) {
  while (i < text.size()) {
    size_t next;
    if (class_at(text, i, &next) != cls) break;
    i = next;
  }
  return i;
}

// End of a run of [^\s\p{L}\p{N}] starting at i.
size_t other_run_end(std::string_view text, size_t i) { return run_end(text, i, CharClass::other); }

}  // namespace

const std::string& byte_level_char(unsigned char b) { return kBytes.chars[b]; }

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += kBytes.chars[static_cast<unsigned char>(c)];
  return out;
}

void gpt2_split(std::string_view text, std::vector<std::string_view>& out) {
  size_t i = 0;
  while (i < text.size()) {
    size_t end = 0;
    if (const size_t n = contraction_at(text, i)) {
      end = i + n;
    } else {
      // ` ?X+` for X in letters, numbers, others: an optional U+0020, then a run.
      size_t start = i;
      if (text[i] == ' ' && i + 1 < text.size()) start = i + 1;
      size_t next;
      const CharClass cls = class_at(text, start, &next);
      if (cls != CharClass::space) {
        end = cls == CharClass::other ? other_run_end(text, start) : run_end(text, start, cls);
      } else {
        // Whitespace: `\s+(?!\S)` keeps the last space for the next word
        // when one follows; `\s+` takes a lone space before a word.
        const size_t ws_end = run_end(text, i, CharClass::space);
        if (ws_end == text.size()) {
          end = ws_end;
        } else {
          size_t last = ws_end - 1;  // start of the run's last character
          while (last > i && (static_cast<unsigned char>(text[last]) & 0xC0) == 0x80) --last;
          end = last > i ? last : ws_end;
        }
      }
    }
    out.push_back(text.substr(i, end - i));
    i = end;
  }
}

}  // namespace stoke
