#include "text/unicode_changes.h"

#include <algorithm>

#include <utf8proc.h>

#include "core/utf8.h"

namespace stoke {

namespace {

int combining_class(char32_t c) { return utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->combining_class; }

// The primary composite of a and b, or 0.
char32_t compose_pair(char32_t a, char32_t b) {
  utf8proc_int32_t buf[2] = {static_cast<utf8proc_int32_t>(a), static_cast<utf8proc_int32_t>(b)};
  const utf8proc_ssize_t n = utf8proc_normalize_utf32(buf, 2, static_cast<utf8proc_option_t>(UTF8PROC_COMPOSE | UTF8PROC_STABLE));
  return n == 1 ? static_cast<char32_t>(buf[0]) : 0;
}

}  // namespace

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

}  // namespace stoke
