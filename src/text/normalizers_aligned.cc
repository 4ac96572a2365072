// TextNormalizer::normalize_aligned: each step as Hugging Face's
// NormalizedString runs it, with the same list of (character, change) it
// builds, so the alignment (and the offsets from it) follow HF's rules.
#include <algorithm>
#include <cstdlib>

#include <utf8proc.h>

#include "core/utf8.h"
#include "text/normalizers.h"
#include "text/unicode_props.h"

namespace stoke {

namespace {

int combining_class(char32_t c) { return utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->combining_class; }

// The primary composite of a and b, or 0.
char32_t compose_pair(char32_t a, char32_t b) {
  utf8proc_int32_t buf[2] = {static_cast<utf8proc_int32_t>(a), static_cast<utf8proc_int32_t>(b)};
  const utf8proc_ssize_t n = utf8proc_normalize_utf32(buf, 2, static_cast<utf8proc_option_t>(UTF8PROC_COMPOSE | UTF8PROC_STABLE));
  return n == 1 ? static_cast<char32_t>(buf[0]) : 0;
}

// NFD/NFKD (compose false) or NFC/NFKC as the unicode-normalization-alignments
// crate HF uses yields it: a character's decomposition is its first character
// (change 0) and the rest inserted (1); canonical reordering carries the
// changes; a composition adds the absorbed character's change, minus one.
std::vector<CharChange> unicode_changes(std::string_view text, bool compose, bool compat) {
  struct Item {
    char32_t c;
    int change;
    int ccc;
  };
  std::vector<Item> decomposed;
  decomposed.reserve(text.size());
  const auto options = static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0));
  size_t run_start = 0;  // the current run of non-starters, for reordering
  auto flush_run = [&] {
    std::stable_sort(decomposed.begin() + static_cast<std::ptrdiff_t>(run_start), decomposed.end(),
                     [](const Item& x, const Item& y) { return x.ccc < y.ccc; });
  };
  for (size_t i = 0; i < text.size();) {
    const char32_t c = utf8_decode(text, i);
    utf8proc_int32_t buf[32];
    int boundclass = 0;
    utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buf, 32, options, &boundclass);
    if (n < 0 || n > 32) {
      buf[0] = static_cast<utf8proc_int32_t>(c);
      n = 1;
    }
    for (utf8proc_ssize_t k = 0; k < n; ++k) {
      const auto d = static_cast<char32_t>(buf[k]);
      const int ccc = combining_class(d);
      if (ccc == 0) {
        flush_run();
        run_start = decomposed.size() + 1;
      }
      decomposed.push_back({d, k == 0 ? 0 : 1, ccc});
    }
  }
  flush_run();
  std::vector<CharChange> out;
  out.reserve(decomposed.size());
  if (!compose) {
    for (const Item& d : decomposed) out.push_back({d.c, d.change});
    return out;
  }
  // The crate's Recompositions state machine.
  bool has_composee = false;
  CharChange composee{0, 0};
  int last_ccc = -1;  // -1: none
  std::vector<CharChange> buffer;
  auto purge = [&] {
    out.insert(out.end(), buffer.begin(), buffer.end());
    buffer.clear();
  };
  for (const Item& d : decomposed) {
    if (!has_composee) {
      if (d.ccc != 0) {
        out.push_back({d.c, d.change});
        continue;
      }
      composee = {d.c, d.change};
      has_composee = true;
      continue;
    }
    if (last_ccc < 0) {
      if (const char32_t r = compose_pair(composee.c, d.c)) {
        composee = {r, composee.change + d.change - 1};
        continue;
      }
      if (d.ccc == 0) {
        out.push_back(composee);
        composee = {d.c, d.change};
        continue;
      }
      buffer.push_back({d.c, d.change});
      last_ccc = d.ccc;
      continue;
    }
    if (last_ccc >= d.ccc) {  // blocked from the composee
      if (d.ccc == 0) {
        out.push_back(composee);
        purge();
        composee = {d.c, d.change};
        last_ccc = -1;
        continue;
      }
      buffer.push_back({d.c, d.change});
      last_ccc = d.ccc;
      continue;
    }
    if (const char32_t r = compose_pair(composee.c, d.c)) {
      composee = {r, composee.change + d.change - 1};
      continue;
    }
    buffer.push_back({d.c, d.change});
    last_ccc = d.ccc;
  }
  if (has_composee) out.push_back(composee);
  purge();
  return out;
}

void unicode_normalize(AlignedText& t, bool compose, bool compat) {
  int options = UTF8PROC_STABLE | (compose ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) | (compat ? UTF8PROC_COMPAT : 0);
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n =
      t.text.empty() ? 0
                     : utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(t.text.data()),
                                    static_cast<utf8proc_ssize_t>(t.text.size()), &mapped,
                                    static_cast<utf8proc_option_t>(options));
  const bool same = n < 0 || (static_cast<size_t>(n) == t.text.size() &&
                              std::equal(t.text.begin(), t.text.end(), reinterpret_cast<const char*>(mapped)));
  std::free(mapped);
  if (same) return;  // already normal: every character maps to itself (change 0)
  t.transform(unicode_changes(t.text, compose, compat));
}

void lowercase(AlignedText& t) {
  std::vector<CharChange> dest;
  dest.reserve(t.text.size());
  for (size_t i = 0; i < t.text.size();) {
    char32_t lowered[3];
    const int n = unicode::to_lower_full(utf8_decode(t.text, i), lowered);
    for (int k = 0; k < n; ++k) dest.push_back({lowered[k], k > 0 ? 1 : 0});
  }
  t.transform(dest);
}

// Keeps the characters `keep` says (HF's filter: the kept ones keep their alignment).
template <typename Keep>
void filter(AlignedText& t, Keep keep) {
  AlignedText out;
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

void strip(AlignedText& t, bool left, bool right) {
  size_t begin = 0, end = t.text.size();
  if (left) {
    while (begin < end) {
      size_t next = begin;
      if (!unicode::is_white_space(utf8_decode(t.text, next))) break;
      begin = next;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(t.text[start]) & 0xC0) == 0x80) --start;
      size_t i = start;
      if (!unicode::is_white_space(utf8_decode(t.text, i))) break;
      end = start;
    }
  }
  t = t.slice(begin, end);
}

}  // namespace

bool TextNormalizer::normalize_aligned(std::string_view text, AlignedText& out) const {
  out = AlignedText::identity(text);
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case NormalizerStep::Kind::precompiled: {
        std::vector<CharChange> dest;
        if (step.charsmap->changes(out.text, dest)) out.transform(dest);
        break;
      }
      case NormalizerStep::Kind::nfc:
        unicode_normalize(out, true, false);
        break;
      case NormalizerStep::Kind::nfd:
        unicode_normalize(out, false, false);
        break;
      case NormalizerStep::Kind::nfkc:
        unicode_normalize(out, true, true);
        break;
      case NormalizerStep::Kind::nfkd:
        unicode_normalize(out, false, true);
        break;
      case NormalizerStep::Kind::lowercase:
        lowercase(out);
        break;
      case NormalizerStep::Kind::replace:
        out.replace_all(step.pattern, step.content);
        break;
      case NormalizerStep::Kind::strip:
        strip(out, step.strip_left, step.strip_right);
        break;
      case NormalizerStep::Kind::prepend:
        out.prepend(step.content);
        break;
      case NormalizerStep::Kind::strip_accents:
        filter(out, [](char32_t c) { return !unicode::is_mark(c); });
        break;
      case NormalizerStep::Kind::bert:
        return false;
    }
  }
  return true;
}

}  // namespace stoke
