#include "text/normalizers.h"

#include <cstdlib>

#include <utf8proc.h>

#include "core/utf8.h"
#include "text/tokenizer.h"
#include "text/unicode_props.h"

namespace stoke {

namespace {

std::string utf8proc_map_string(std::string_view text, int options) {
  if (text.empty()) return {};
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0) {  // only on invalid UTF-8, which the tokenizer has already replaced
    std::free(out);
    return std::string(text);
  }
  std::string s(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return s;
}

std::string replace_all(std::string_view text, const std::string& pattern, const std::string& content) {
  if (pattern.empty()) return std::string(text);
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(pattern, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(content);
    pos = hit + pattern.size();
  }
  out.append(text.substr(pos));
  return out;
}

std::string strip(std::string_view text, bool left, bool right) {
  size_t begin = 0, end = text.size();
  if (left) {
    while (begin < end) {
      size_t next = begin;
      if (!unicode::is_white_space(utf8_decode(text, next))) break;
      begin = next;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      size_t i = start;
      if (!unicode::is_white_space(utf8_decode(text, i))) break;
      end = start;
    }
  }
  return std::string(text.substr(begin, end - begin));
}

// all_marks: every M* (tokenizer.json's StripAccents); else Mn only (BERT's).
std::string remove_marks(std::string_view text, bool all_marks = false) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const char32_t c = utf8_decode(text, i);
    if (!(all_marks ? unicode::is_mark(c) : unicode::is_nonspacing_mark(c))) utf8_append(out, c);
  }
  return out;
}

// HF's NormalizedString::lowercase: each character on its own (Rust's
// char::to_lowercase, full mapping), so no final sigma: "ΣΟΦΟΣ" -> "σοφοσ".
std::string lower_each_char(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    char32_t lowered[3];
    const int n = unicode::to_lower_full(utf8_decode(text, i), lowered);
    for (int k = 0; k < n; ++k) utf8_append(out, lowered[k]);
  }
  return out;
}

}  // namespace

std::string bert_normalize(std::string_view text, const BertNormalizerOptions& o) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const char32_t c = utf8_decode(text, i);
    if (o.clean_text) {
      if (unicode::is_bert_removed(c)) continue;
      if (unicode::is_bert_whitespace(c)) {
        out.push_back(' ');
        continue;
      }
    }
    if (o.handle_chinese_chars && unicode::is_cjk_ideograph(c)) {
      out.push_back(' ');
      utf8_append(out, c);
      out.push_back(' ');
      continue;
    }
    utf8_append(out, c);
  }
  if (o.strips_accents()) out = remove_marks(utf8proc_map_string(out, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE));
  if (o.lowercase) out = python_lower(out);
  return out;
}

std::string TextNormalizer::normalize(std::string_view text) const {
  std::string s(text);
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case NormalizerStep::Kind::precompiled:
        s = step.charsmap->normalize(s);
        break;
      case NormalizerStep::Kind::nfc:
        s = utf8proc_map_string(s, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        break;
      case NormalizerStep::Kind::nfd:
        s = utf8proc_map_string(s, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
        break;
      case NormalizerStep::Kind::nfkc:
        s = utf8proc_map_string(s, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
        break;
      case NormalizerStep::Kind::nfkd:
        s = utf8proc_map_string(s, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
        break;
      case NormalizerStep::Kind::lowercase:
        s = lower_each_char(s);
        break;
      case NormalizerStep::Kind::replace:
        s = replace_all(s, step.pattern, step.content);
        break;
      case NormalizerStep::Kind::strip:
        s = strip(s, step.strip_left, step.strip_right);
        break;
      case NormalizerStep::Kind::prepend:
        if (!s.empty()) s = step.content + s;
        break;
      case NormalizerStep::Kind::strip_accents:
        s = remove_marks(s, true);
        break;
      case NormalizerStep::Kind::bert:
        s = bert_normalize(s, step.bert);
        break;
    }
  }
  return s;
}

}  // namespace stoke
