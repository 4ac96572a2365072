#include "text/aligned_text.h"

#include "core/utf8.h"

namespace stoke {

namespace {

size_t char_bytes(std::string_view s, size_t at) {
  size_t next = at;
  utf8_decode(s, next);
  return next - at;
}

}  // namespace

AlignedText AlignedText::identity(std::string_view original) {
  AlignedText a;
  a.text = std::string(original);
  a.align.resize(original.size());
  for (size_t i = 0; i < original.size();) {
    const size_t n = char_bytes(original, i);
    for (size_t k = 0; k < n; ++k)
      a.align[i + k] = {static_cast<uint32_t>(i), static_cast<uint32_t>(i + n)};
    i += n;
  }
  return a;
}

void AlignedText::transform(const std::vector<CharChange>& dest, size_t initial_offset) {
  size_t offset = 0;  // the next old character to be replaced or removed
  for (size_t k = 0; k < initial_offset && offset < text.size(); ++k) offset += char_bytes(text, offset);
  std::string out;
  std::vector<TokenOffset> out_align;
  out.reserve(text.size());
  out_align.reserve(text.size());
  for (const CharChange& d : dest) {
    TokenOffset a;
    if (d.change > 0) {
      // Inserted: the alignment of the old byte before (none at the start).
      if (offset >= 1 && offset - 1 < align.size()) a = align[offset - 1];
    } else if (offset < align.size()) {
      a = align[offset];
    } else if (!align.empty()) {  // more replacing characters than old ones: not from HF's normalizers
      a = align.back();
    }
    if (d.change <= 0 && offset < text.size()) offset += char_bytes(text, offset);
    for (int k = 0; k < -d.change && offset < text.size(); ++k) offset += char_bytes(text, offset);
    const size_t before = out.size();
    utf8_append(out, d.c);
    out_align.insert(out_align.end(), out.size() - before, a);
  }
  text = std::move(out);
  align = std::move(out_align);
}

TokenOffset AlignedText::original(size_t begin, size_t end) const {
  return {align[begin].start, align[end - 1].end};
}

void AlignedText::prepend(std::string_view content) {
  if (text.empty() || content.empty()) return;
  std::vector<CharChange> dest;
  for (size_t i = 0; i < content.size();) dest.push_back({utf8_decode(content, i), dest.empty() ? 0 : 1});
  std::vector<CharChange> rest = unchanged_chars(text);
  rest.front().change = 1;
  dest.insert(dest.end(), rest.begin(), rest.end());
  transform(dest);
}

void AlignedText::replace_all(std::string_view pattern, std::string_view content) {
  if (pattern.empty()) return;
  AlignedText out;
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(pattern, pos);
    if (hit == std::string::npos) break;
    out.text.append(text, pos, hit - pos);
    out.align.insert(out.align.end(), align.begin() + static_cast<std::ptrdiff_t>(pos),
                     align.begin() + static_cast<std::ptrdiff_t>(hit));
    out.text += content;
    out.align.insert(out.align.end(), content.size(), align[hit + pattern.size() - 1]);
    pos = hit + pattern.size();
  }
  out.text.append(text, pos);
  out.align.insert(out.align.end(), align.begin() + static_cast<std::ptrdiff_t>(pos), align.end());
  *this = std::move(out);
}

AlignedText AlignedText::slice(size_t begin, size_t end) const {
  AlignedText s;
  s.text = text.substr(begin, end - begin);
  s.align.assign(align.begin() + static_cast<std::ptrdiff_t>(begin), align.begin() + static_cast<std::ptrdiff_t>(end));
  return s;
}

std::vector<CharChange> unchanged_chars(std::string_view text) {
  std::vector<CharChange> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) out.push_back({utf8_decode(text, i), 0});
  return out;
}

}  // namespace stoke
