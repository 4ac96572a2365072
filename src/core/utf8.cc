#include "core/utf8.h"

namespace stoke {

char32_t utf8_decode(std::string_view s, size_t& i, bool* invalid) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  const unsigned char b0 = p[i];
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  // Table 3-7 of the Unicode standard: the valid ranges of the second byte
  // depend on the first; later bytes are always 80..BF.
  int len;
  unsigned char lo = 0x80, hi = 0xBF;
  char32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // excludes UTF-16 surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    ++i;  // 80..C1, F5..FF can never start a sequence
    if (invalid) *invalid = true;
    return kReplacementChar;
  }
  size_t j = i + 1;
  for (int k = 1; k < len; ++k, ++j) {
    if (j >= n) break;
    const unsigned char b = p[j];
    const unsigned char l = (k == 1) ? lo : 0x80, h = (k == 1) ? hi : 0xBF;
    if (b < l || b > h) break;
    cp = (cp << 6) | (b & 0x3F);
    if (k == len - 1) {
      i = j + 1;
      return cp;
    }
  }
  // Maximal subpart [i, j) is invalid: one replacement for all of it.
  i = j;
  if (invalid) *invalid = true;
  return kReplacementChar;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool utf8_is_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // Fast skip over ASCII, the common case.
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    bool bad = false;
    utf8_decode(s, i, &bad);
    if (bad) return false;
  }
  return true;
}

std::string utf8_sanitize(std::string_view s, size_t* replaced) {
  size_t count = 0;
  if (utf8_is_valid(s)) {
    if (replaced) *replaced = 0;
    return std::string(s);
  }
  std::string out;
  out.reserve(s.size() + 16);
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    bool bad = false;
    char32_t cp = utf8_decode(s, i, &bad);
    if (bad) {
      ++count;
      utf8_append(out, cp);
    } else {
      out.append(s.data() + start, i - start);
    }
  }
  if (replaced) *replaced = count;
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t i = 0, n = 0;
  while (i < s.size()) {
    utf8_decode(s, i);
    ++n;
  }
  return n;
}

}  // namespace stoke
