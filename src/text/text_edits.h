// The edits normalizers and pre-tokenizers make to a text, each for both
// kinds of text the tokenizer carries: a plain std::string (the encode path:
// bytes only) and an AlignedText (the offsets path: each byte's original
// range follows HF's rules, aligned_text.h). The two overloads of each edit
// give the same bytes; the plain one does no alignment work. So every
// normalizer and pre-tokenizer step is written once, as a template over the
// text kind (normalizers.cc, pre_tokenizers.cc), and the kind is chosen at
// compile time, never per byte.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/utf8.h"
#include "text/aligned_text.h"

namespace stoke {

template <class Text>
inline constexpr bool is_aligned_text = std::is_same_v<Text, AlignedText>;

inline std::string_view bytes_of(const std::string& t) { return t; }
inline std::string_view bytes_of(const AlignedText& t) { return t.text; }

// Bytes [begin, end) (character boundaries).
inline std::string slice(const std::string& t, size_t begin, size_t end) { return t.substr(begin, end - begin); }
inline AlignedText slice(const AlignedText& t, size_t begin, size_t end) { return t.slice(begin, end); }

// HF's prepend: nothing on an empty text.
inline void prepend(std::string& t, std::string_view content) {
  if (t.empty()) return;
  std::string out;
  out.reserve(content.size() + t.size());
  out.append(content).append(t);
  t = std::move(out);
}
inline void prepend(AlignedText& t, std::string_view content) { t.prepend(content); }

// Every `pattern` (a plain string, left to right) replaced by `content`.
inline void replace_all(std::string& t, std::string_view pattern, std::string_view content) {
  if (pattern.empty()) return;
  size_t hit = t.find(pattern);
  if (hit == std::string::npos) return;  // the common case: no copy
  std::string out;
  out.reserve(t.size());
  size_t pos = 0;
  for (; hit != std::string::npos; hit = t.find(pattern, pos)) {
    out.append(t, pos, hit - pos);
    out.append(content);
    pos = hit + pattern.size();
  }
  out.append(t, pos);
  t = std::move(out);
}
inline void replace_all(AlignedText& t, std::string_view pattern, std::string_view content) {
  t.replace_all(pattern, content);
}

// Keeps the characters `keep(c)` says (HF's filter: kept ones keep their alignment).
template <class Keep>
void filter_chars(std::string& t, Keep keep) {
  std::string out;
  out.reserve(t.size());
  for (size_t i = 0; i < t.size();) {
    const char32_t c = utf8_decode(t, i);
    if (keep(c)) utf8_append(out, c);  // re-encoded: an invalid byte comes out as U+FFFD, as it always did
  }
  t = std::move(out);
}
template <class Keep>
void filter_chars(AlignedText& t, Keep keep) {
  AlignedText out;
  out.text.reserve(t.text.size());
  out.align.reserve(t.align.size());
  for (size_t i = 0; i < t.text.size();) {
    const size_t at = i;
    if (keep(utf8_decode(t.text, i))) {
      out.text.append(t.text, at, i - at);
      out.align.insert(out.align.end(), t.align.begin() + static_cast<std::ptrdiff_t>(at),
                       t.align.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  t = std::move(out);
}

// HF's transform, one old character at a time: `map(c, emit)` calls
// emit(new_char, change) for each character c becomes (change as in
// aligned_text.h: 0 for the first, 1 for each one inserted after it). The
// plain text only appends the characters; the aligned text also applies the
// changes.
template <class Map>
void map_chars(std::string& t, Map map) {
  std::string out;
  out.reserve(t.size());
  auto emit = [&out](char32_t c, int) { utf8_append(out, c); };
  for (size_t i = 0; i < t.size();) map(utf8_decode(t, i), emit);
  t = std::move(out);
}
template <class Map>
void map_chars(AlignedText& t, Map map) {
  std::vector<CharChange> dest;
  dest.reserve(t.text.size());
  auto emit = [&dest](char32_t c, int change) { dest.push_back({c, change}); };
  for (size_t i = 0; i < t.text.size();) map(utf8_decode(t.text, i), emit);
  t.transform(dest);
}

}  // namespace stoke
