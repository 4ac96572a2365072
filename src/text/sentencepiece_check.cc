#include "text/sentencepiece_check.h"

#include <cstdint>
#include <cstring>
#include <unordered_set>

#include "core/error.h"
#include "core/utf8.h"

namespace stoke {

namespace {

// A cursor over protobuf wire format (varints, length-delimited fields).
class Wire {
 public:
  Wire(std::string_view bytes, const std::string& label, const char* where)
      : p_(bytes), label_(label), where_(where) {}
  bool done() const { return pos_ >= p_.size(); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= p_.size()) fail("truncated varint");
      const uint8_t b = static_cast<uint8_t>(p_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    if (n > p_.size() - pos_) fail("length-delimited field runs past the end");
    std::string_view s = p_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  void skip(uint32_t wire_type) {
    switch (wire_type) {
      case 0: varint(); break;
      case 1: advance(8); break;
      case 2: bytes(); break;
      case 5: advance(4); break;
      default: fail("unsupported wire type " + std::to_string(wire_type));
    }
  }
  // Reads a tag: field number and wire type.
  std::pair<uint32_t, uint32_t> tag() {
    const uint64_t t = varint();
    if ((t >> 3) == 0 || (t >> 3) > (1u << 29)) fail("bad field number");
    return {static_cast<uint32_t>(t >> 3), static_cast<uint32_t>(t & 7)};
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(Errc::format, label_ + ": not a valid SentencePiece model (" + where_ + ": " + what + ")");
  }

 private:
  void advance(size_t n) {
    if (n > p_.size() - pos_) fail("fixed-size field runs past the end");
    pos_ += n;
  }
  std::string_view p_;
  size_t pos_ = 0;
  const std::string& label_;
  std::string where_;
};

// darts-clone unit layout (what libsentencepiece's normalizer walks).
uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }
bool unit_is_leaf(uint32_t u) { return u >> 31; }

// precompiled_charsmap: u32 trie size, the trie's 32-bit units, then a pool of
// NUL-terminated replacement strings that leaf values index into.
void check_charsmap(std::string_view blob, Wire& w) {
  if (blob.empty()) return;
  if (blob.size() <= 4) w.fail("normalization table shorter than its header");
  uint32_t trie_size;
  std::memcpy(&trie_size, blob.data(), 4);
  if (trie_size == 0 || trie_size % 4 != 0 || trie_size > blob.size() - 4)
    w.fail("normalization table's trie size " + std::to_string(trie_size) + " does not fit the table");
  const size_t units = trie_size / 4;
  const std::string_view pool = blob.substr(4 + trie_size);
  if (pool.empty() || pool.back() != '\0') w.fail("normalization strings are not NUL-terminated");
  for (size_t i = 0; i < units; ++i) {
    uint32_t u;
    std::memcpy(&u, blob.data() + 4 + i * 4, 4);
    if (unit_is_leaf(u)) {
      if (unit_value(u) >= pool.size()) w.fail("normalization rule points past its strings");
      continue;
    }
    // A traversal from unit i reads unit (i ^ offset) ^ byte for any byte,
    // without bounds checks: the whole 256-unit block must be inside.
    const size_t base = i ^ unit_offset(u);
    if ((base | 0xFF) >= units) w.fail("normalization trie links outside the table");
  }
}

void check_normalizer_spec(std::string_view spec, const std::string& label, const char* which) {
  Wire w(spec, label, which);
  while (!w.done()) {
    auto [field, type] = w.tag();
    if (field == 2) {
      if (type != 2) w.fail("precompiled_charsmap is not bytes");
      check_charsmap(w.bytes(), w);
    } else {
      w.skip(type);
    }
  }
}

}  // namespace

void check_sentencepiece_model(std::string_view serialized, const std::string& label) {
  Wire w(serialized, label, "model");
  std::unordered_set<std::string_view> seen;
  size_t pieces = 0;
  while (!w.done()) {
    auto [field, type] = w.tag();
    if (field == 1) {  // repeated SentencePiece pieces
      if (type != 2) w.fail("pieces field has the wrong wire type");
      Wire p(w.bytes(), label, "piece");
      std::string_view text;
      bool has_text = false;
      while (!p.done()) {
        auto [pf, pt] = p.tag();
        if (pf == 1) {
          if (pt != 2) p.fail("piece text has the wrong wire type");
          text = p.bytes();
          has_text = true;
        } else if (pf == 3) {
          if (pt != 0) p.fail("piece type has the wrong wire type");
          const uint64_t t = p.varint();
          if (t < 1 || t > 6) p.fail("piece type " + std::to_string(t) + " (expected 1..6)");
        } else {
          p.skip(pt);
        }
      }
      const std::string n = std::to_string(pieces);
      if (!has_text || text.empty()) w.fail("piece " + n + " is empty");
      if (!utf8_is_valid(text)) w.fail("piece " + n + " is not valid UTF-8");
      // The trie builder treats pieces as C strings: a NUL would cut the key.
      if (text.find('\0') != std::string_view::npos) w.fail("piece " + n + " contains a NUL byte");
      if (!seen.insert(text).second) w.fail("piece " + n + " appears twice");
      ++pieces;
    } else if (field == 3 || field == 5) {  // normalizer_spec, denormalizer_spec
      if (type != 2) w.fail("normalizer spec has the wrong wire type");
      check_normalizer_spec(w.bytes(), label, field == 3 ? "normalizer" : "denormalizer");
    } else {
      w.skip(type);
    }
  }
  if (pieces == 0) w.fail("no pieces");
}

std::string sentencepiece_charsmap(std::string_view serialized, const std::string& label) {
  Wire w(serialized, label, "model");
  std::string charsmap;
  while (!w.done()) {
    auto [field, type] = w.tag();
    if (field != 3 || type != 2) {
      w.skip(type);
      continue;
    }
    Wire spec(w.bytes(), label, "normalizer");
    while (!spec.done()) {
      auto [f, t] = spec.tag();
      if (f == 2 && t == 2)
        charsmap = std::string(spec.bytes());
      else
        spec.skip(t);
    }
  }
  return charsmap;
}

}  // namespace stoke
