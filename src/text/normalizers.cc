// The normalizer steps, each written once over either kind of text
// (text_edits.h): a std::string for the encode path, an AlignedText for the
// offsets path, where each step builds the same list of (character, change)
// Hugging Face's NormalizedString builds, so the alignment (and the offsets
// from it) follow HF's rules.
#include "text/normalizers.h"

#include <cstdlib>

#include <utf8proc.h>

#include "core/utf8.h"
#include "text/text_edits.h"
#include "text/tokenizer.h"
#include "text/unicode_changes.h"
#include "text/unicode_props.h"

namespace stoke {

namespace {

// utf8proc's mapping of text; false when it is the text itself (or on
// invalid UTF-8, which the tokenizer has already replaced).
bool utf8proc_mapped(std::string_view text, int options, std::string& mapped) {
  if (text.empty()) return false;
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  if (n >= 0) mapped.assign(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return n >= 0 && mapped != text;
}

// NFC, NFD, NFKC, NFKD. Plain text takes utf8proc's result; aligned text
// (when it changes) the crate's changes, whose characters are the same.
template <class Text>
void unicode_normalize(Text& t, bool compose, bool compat) {
  const int options =
      UTF8PROC_STABLE | (compose ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) | (compat ? UTF8PROC_COMPAT : 0);
  std::string mapped;
  if (!utf8proc_mapped(bytes_of(t), options, mapped)) return;  // already normal: every character maps to itself
  if constexpr (is_aligned_text<Text>)
    t.transform(unicode_changes(t.text, compose, compat));
  else
    t = std::move(mapped);
}

// HF's NormalizedString::lowercase: each character on its own (Rust's
// char::to_lowercase, full mapping), so no final sigma: "ΣΟΦΟΣ" -> "σοφοσ".
template <class Text>
void lowercase(Text& t) {
  map_chars(t, [](char32_t c, auto& emit) {
    char32_t lowered[3];
    const int n = unicode::to_lower_full(c, lowered);
    for (int k = 0; k < n; ++k) emit(lowered[k], k > 0 ? 1 : 0);
  });
}

template <class Text>
void strip(Text& t, bool left, bool right) {
  const std::string_view b = bytes_of(t);
  size_t begin = 0, end = b.size();
  if (left) {
    while (begin < end) {
      size_t next = begin;
      if (!unicode::is_white_space(utf8_decode(b, next))) break;
      begin = next;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(b[start]) & 0xC0) == 0x80) --start;
      size_t i = start;
      if (!unicode::is_white_space(utf8_decode(b, i))) break;
      end = start;
    }
  }
  if (begin != 0 || end != b.size()) t = slice(t, begin, end);
}

void precompiled(std::string& t, const PrecompiledCharsmap& charsmap) { t = charsmap.normalize(t); }
void precompiled(AlignedText& t, const PrecompiledCharsmap& charsmap) {
  std::vector<CharChange> dest;
  if (charsmap.changes(t.text, dest)) t.transform(dest);
}

// Every step in order; false when a step's alignment is not followed
// (BertNormalizer on aligned text: WordPiece has its own offsets).
template <class Text>
bool run_steps(const std::vector<NormalizerStep>& steps, Text& t) {
  for (const NormalizerStep& step : steps) {
    switch (step.kind) {
      case NormalizerStep::Kind::precompiled:
        precompiled(t, *step.charsmap);
        break;
      case NormalizerStep::Kind::nfc:
        unicode_normalize(t, true, false);
        break;
      case NormalizerStep::Kind::nfd:
        unicode_normalize(t, false, false);
        break;
      case NormalizerStep::Kind::nfkc:
        unicode_normalize(t, true, true);
        break;
      case NormalizerStep::Kind::nfkd:
        unicode_normalize(t, false, true);
        break;
      case NormalizerStep::Kind::lowercase:
        lowercase(t);
        break;
      case NormalizerStep::Kind::replace:
        replace_all(t, step.pattern, step.content);
        break;
      case NormalizerStep::Kind::strip:
        strip(t, step.strip_left, step.strip_right);
        break;
      case NormalizerStep::Kind::prepend:
        prepend(t, step.content);
        break;
      case NormalizerStep::Kind::strip_accents:  // every M* (Mn, Mc, Me), as HF
        filter_chars(t, [](char32_t c) { return !unicode::is_mark(c); });
        break;
      case NormalizerStep::Kind::bert:
        if constexpr (is_aligned_text<Text>)
          return false;
        else
          t = bert_normalize(t, step.bert);
        break;
    }
  }
  return true;
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
  if (o.strips_accents()) {  // NFD, then the Mn marks removed (BERT's rule; StripAccents takes every M*)
    unicode_normalize(out, false, false);
    filter_chars(out, [](char32_t c) { return !unicode::is_nonspacing_mark(c); });
  }
  if (o.lowercase) out = python_lower(out);
  return out;
}

std::string TextNormalizer::normalize(std::string_view text) const {
  std::string s(text);
  run_steps(steps_, s);
  return s;
}

bool TextNormalizer::normalize_aligned(std::string_view text, AlignedText& out) const {
  out = AlignedText::identity(text);
  return run_steps(steps_, out);
}

}  // namespace stoke
