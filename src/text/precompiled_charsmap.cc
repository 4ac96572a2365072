#include "text/precompiled_charsmap.h"

#include <utf8proc.h>

#include "core/error.h"
#include "core/utf8.h"

namespace stoke {

namespace {

// darts-clone's unit fields.
bool unit_has_leaf(uint32_t u) { return ((u >> 8) & 1) == 1; }
uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }
uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::string base64_decode(std::string_view text, const std::string& label) {
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '=') {
      ++pad;
      continue;
    }
    const int v = base64_value(c);
    if (v < 0 || pad > 0) {
      throw Error(Errc::format, label + ": not base64 (byte " + std::to_string(i) + " of " +
                                    std::to_string(text.size()) + ")");
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  if (pad > 2 || (text.size() % 4) != 0) throw Error(Errc::format, label + ": not base64 (length or padding)");
  return out;
}

PrecompiledCharsmap PrecompiledCharsmap::from_base64(std::string_view base64, const std::string& label) {
  return PrecompiledCharsmap(base64_decode(base64, label), label);
}

PrecompiledCharsmap::PrecompiledCharsmap(std::string_view blob, const std::string& label) {
  if (blob.empty()) return;  // SentencePiece's "identity" rule: no table
  if (blob.size() < 4) throw Error(Errc::format, label + ": charsmap of " + std::to_string(blob.size()) +
                                                     " bytes, expected at least 4");
  const uint32_t trie_bytes = static_cast<uint32_t>(static_cast<uint8_t>(blob[0])) |
                              static_cast<uint32_t>(static_cast<uint8_t>(blob[1])) << 8 |
                              static_cast<uint32_t>(static_cast<uint8_t>(blob[2])) << 16 |
                              static_cast<uint32_t>(static_cast<uint8_t>(blob[3])) << 24;
  if (trie_bytes == 0 || trie_bytes % 4 != 0 || trie_bytes > blob.size() - 4) {
    throw Error(Errc::format, label + ": charsmap trie size " + std::to_string(trie_bytes) +
                                  ", expected a positive multiple of 4 within the " + std::to_string(blob.size()) +
                                  "-byte table");
  }
  units_.resize(trie_bytes / 4);
  for (size_t k = 0; k < units_.size(); ++k) {
    const auto* p = reinterpret_cast<const uint8_t*>(blob.data()) + 4 + 4 * k;
    units_[k] = uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  }
  pool_ = std::string(blob.substr(4 + trie_bytes));
  if (!utf8_is_valid(pool_)) throw Error(Errc::format, label + ": charsmap strings are not valid UTF-8");
}

std::optional<std::string_view> PrecompiledCharsmap::transform(std::string_view chunk) const {
  if (units_.empty()) return std::nullopt;
  const size_t n = units_.size();
  size_t pos = unit_offset(units_[0]);
  for (char ch : chunk) {
    const auto c = static_cast<uint8_t>(ch);
    if (c == 0) break;
    pos ^= c;
    if (pos >= n) return std::nullopt;
    const uint32_t unit = units_[pos];
    if (unit_label(unit) != c) return std::nullopt;
    pos ^= unit_offset(unit);
    if (pos >= n) return std::nullopt;
    if (unit_has_leaf(unit)) {
      // The first (shortest) key found decides, as the Rust reader does.
      const size_t start = unit_value(units_[pos]);
      if (start >= pool_.size()) return std::nullopt;
      size_t end = pool_.find('\0', start);
      if (end == std::string::npos) end = pool_.size();
      std::string_view out(pool_.data() + start, end - start);
      // A replacement must be whole characters (a cut inside one would make
      // the text invalid UTF-8 for everything after).
      if (!utf8_is_valid(out)) return std::nullopt;
      return out;
    }
  }
  return std::nullopt;
}

size_t PrecompiledCharsmap::grapheme_end(std::string_view text, size_t i) {
  size_t end = i;
  char32_t prev = utf8_decode(text, end);
  int32_t state = 0;
  while (end < text.size()) {
    size_t next = end;
    const char32_t cp = utf8_decode(text, next);
    if (utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(prev), static_cast<utf8proc_int32_t>(cp),
                                         &state))
      break;
    prev = cp;
    end = next;
  }
  return end;
}

std::string PrecompiledCharsmap::normalize(std::string_view text) const {
  if (units_.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  // Hugging Face tokenizers (its Precompiled normalizer) looks a whole
  // grapheme cluster up first when it is shorter than 6 bytes, and otherwise
  // each character on its own; SentencePiece's own normalizer differs on
  // rare clusters, and the ids must be those transformers gives.
  size_t i = 0;
  while (i < text.size()) {
    const size_t end = grapheme_end(text, i);
    const std::string_view grapheme = text.substr(i, end - i);
    if (grapheme.size() < 6) {
      if (auto rep = transform(grapheme)) {
        out.append(*rep);
        i = end;
        continue;
      }
    }
    for (size_t k = i; k < end;) {
      size_t next = k;
      utf8_decode(text, next);
      const std::string_view ch = text.substr(k, next - k);
      if (auto rep = transform(ch))
        out.append(*rep);
      else
        out.append(ch);
      k = next;
    }
    i = end;
  }
  return out;
}

namespace {

// HF's `replace` for Precompiled: the new characters with change 0, the last
// ones inserted (1) when there are more, else the last entry of the list
// (possibly an earlier character's, or none at all) takes the removal.
void replace_changes(std::vector<CharChange>& out, std::string_view old_part, std::string_view new_part) {
  const auto old_count = static_cast<int>(utf8_length(old_part));
  const size_t first = out.size();
  for (size_t i = 0; i < new_part.size();) out.push_back({utf8_decode(new_part, i), 0});
  const int diff = static_cast<int>(out.size() - first) - old_count;
  if (diff > 0) {
    for (size_t k = out.size() - static_cast<size_t>(diff); k < out.size(); ++k) out[k].change = 1;
  } else if (diff < 0 && !out.empty()) {
    out.back().change += diff;
  }
}

}  // namespace

bool PrecompiledCharsmap::changes(std::string_view text, std::vector<CharChange>& out) const {
  if (units_.empty()) return false;
  bool modified = false;
  size_t i = 0;
  while (i < text.size()) {
    const size_t end = grapheme_end(text, i);
    const std::string_view grapheme = text.substr(i, end - i);
    if (grapheme.size() < 6) {
      if (auto rep = transform(grapheme)) {
        modified = true;
        replace_changes(out, grapheme, *rep);
        i = end;
        continue;
      }
    }
    for (size_t k = i; k < end;) {
      size_t next = k;
      const char32_t c = utf8_decode(text, next);
      const std::string_view ch = text.substr(k, next - k);
      if (auto rep = transform(ch)) {
        modified = true;
        replace_changes(out, ch, *rep);
      } else {
        out.push_back({c, 0});
      }
      k = next;
    }
    i = end;
  }
  return modified;
}

}  // namespace stoke
