#include "text/wordpiece.h"

#include "core/error.h"
#include "core/file_util.h"
#include "core/utf8.h"
#include "text/normalizers.h"
#include "text/unicode_props.h"

namespace stoke {

namespace {

// ASCII classes for the fast path: almost all bytes of most corpora.
enum AsciiClass : uint8_t { kWordChar, kSpace, kPunct, kRemoved };

struct AsciiTable {
  AsciiClass cls[128];
  AsciiTable() {
    for (int c = 0; c < 128; ++c) {
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
        cls[c] = kSpace;
      else if (unicode::is_bert_removed(static_cast<char32_t>(c)))
        cls[c] = kRemoved;
      else if (unicode::is_bert_punctuation(static_cast<char32_t>(c)))
        cls[c] = kPunct;
      else
        cls[c] = kWordChar;
    }
  }
};
const AsciiTable kAscii;

// Collects the current word's bytes and code-point count; flush() hands it to
// WordPiece. With offsets, each byte's source: the input bytes of the code
// point it was normalized from.
struct WordBuffer {
  std::string bytes;
  size_t chars = 0;
  std::vector<TokenOffset> source;  // per byte of `bytes` (offsets only)
  void clear() {
    bytes.clear();
    chars = 0;
    source.clear();
  }
};

}  // namespace

WordPieceModel::WordPieceModel(std::vector<std::string> vocab, BertNormalizerOptions norm, WordPieceOptions wp)
    : vocab_(std::move(vocab)), norm_(norm), wp_(std::move(wp)) {
  token_ids_.reserve(vocab_.size());
  for (size_t i = 0; i < vocab_.size(); ++i)
    token_ids_[vocab_[i]] = static_cast<int32_t>(i);  // later duplicates win, as in a Python dict
  for (const auto& [token, id] : token_ids_)
    if (!token.empty()) trie_.insert(token, id);
  auto unk = token_ids_.find(wp_.unk_token);
  if (unk == token_ids_.end()) {
    throw Error(Errc::format, "WordPiece vocabulary has no unknown token \"" + wp_.unk_token +
                                  "\" (expected it among the " + std::to_string(vocab_.size()) + " tokens)");
  }
  unk_id_ = unk->second;
  continuation_node_ = wp_.continuing_prefix.empty() ? VocabTrie::root() : trie_.walk(wp_.continuing_prefix);
}

std::string WordPieceModel::describe() const {
  return "WordPiece (" + std::to_string(vocab_.size()) + " tokens, " +
         (norm_.lowercase ? "lowercase" : "cased") + (norm_.strips_accents() ? ", strip accents" : "") + ")";
}

std::string WordPieceModel::normalize(std::string_view text) const { return bert_normalize(text, norm_); }

std::string WordPieceModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_.size()) return wp_.unk_token;
  return vocab_[static_cast<size_t>(id)];
}

int32_t WordPieceModel::token_to_id(std::string_view token) const {
  auto it = token_ids_.find(std::string(token));
  return it == token_ids_.end() ? -1 : it->second;
}

void WordPieceModel::encode_word(std::string_view word, size_t chars, std::vector<int32_t>& out,
                                 EncodeStats& stats) const {
  if (word.empty()) return;
  if (chars > wp_.max_input_chars_per_word) {
    out.push_back(unk_id_);
    return;
  }
  const size_t mark = out.size();
  size_t start = 0;
  while (start < word.size()) {
    // Greedy longest match: walk the trie as far as the word allows and keep
    // the last node that ends a token. Matches always end on a character
    // boundary because every vocabulary entry is whole UTF-8.
    int32_t node = start == 0 ? VocabTrie::root() : continuation_node_;
    int32_t best_id = VocabTrie::kNone;
    size_t best_end = start;
    for (size_t i = start; i < word.size() && node != VocabTrie::kNone; ++i) {
      node = trie_.child(node, static_cast<uint8_t>(word[i]));
      ++stats.lookups;
      if (node != VocabTrie::kNone && trie_.id_at(node) != VocabTrie::kNone) {
        best_id = trie_.id_at(node);
        best_end = i + 1;
      }
    }
    if (best_id == VocabTrie::kNone) {
      // No piece matches here: the whole word becomes [UNK], as in BERT.
      out.resize(mark);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(best_id);
    start = best_end;
  }
}

void WordPieceModel::encode(std::string_view text, std::vector<int32_t>& out, EncodeStats& stats) const {
  encode_impl<false>(text, out, nullptr, stats);
}

bool WordPieceModel::encode_with_offsets(std::string_view text, std::vector<int32_t>& out,
                                         std::vector<TokenOffset>& offsets, EncodeStats& stats) const {
  encode_impl<true>(text, out, &offsets, stats);
  return true;
}

// One pass for both: kOffsets adds the per-byte sources and each piece's
// range; without it the code is the plain encoder's (no cost on that path).
template <bool kOffsets>
void WordPieceModel::encode_impl(std::string_view text, std::vector<int32_t>& out, std::vector<TokenOffset>* offsets,
                                 EncodeStats& stats) const {
  WordBuffer word;
  word.bytes.reserve(64);
  TokenOffset from;  // the code point being read (offsets only)
  auto flush = [&] {
    const size_t mark = out.size();
    encode_word(word.bytes, word.chars, out, stats);
    if constexpr (kOffsets) {
      if (out.size() == mark + 1 && out[mark] == unk_id_) {
        offsets->push_back({word.source.front().start, word.source.back().end});  // the whole word
      } else {
        size_t at = 0;  // pieces are the word's bytes in order ("##" aside)
        for (size_t k = mark; k < out.size(); ++k) {
          size_t len = vocab_[static_cast<size_t>(out[k])].size();
          if (k > mark) len -= wp_.continuing_prefix.size();
          offsets->push_back({word.source[at].start, word.source[at + len - 1].end});
          at += len;
        }
      }
    }
    word.clear();
  };
  auto add_byte = [&](char c) {
    word.bytes.push_back(c);
    if constexpr (kOffsets) word.source.push_back(from);
  };
  auto add_char = [&](char32_t cp) {
    const size_t before = word.bytes.size();
    utf8_append(word.bytes, cp);
    if constexpr (kOffsets) word.source.insert(word.source.end(), word.bytes.size() - before, from);
    ++word.chars;
  };
  auto emit_single = [&](char32_t cp) {  // punctuation / CJK: a word of its own
    flush();
    add_char(cp);
    flush();
  };
  const bool lower = norm_.lowercase;
  const bool strip = norm_.strips_accents();
  const bool clean = norm_.clean_text;

  size_t i = 0;
  while (i < text.size()) {
    const unsigned char b = static_cast<unsigned char>(text[i]);
    if constexpr (kOffsets) from.start = static_cast<uint32_t>(i);
    if (b < 0x80) {
      ++i;
      if constexpr (kOffsets) from.end = static_cast<uint32_t>(i);
      switch (kAscii.cls[b]) {
        case kWordChar:
          add_byte(lower && b >= 'A' && b <= 'Z' ? static_cast<char>(b + 32) : static_cast<char>(b));
          ++word.chars;
          break;
        case kSpace:
          flush();
          break;
        case kPunct:
          emit_single(b);
          break;
        case kRemoved:
          // With clean_text off, control characters stay inside the word.
          if (!clean) {
            add_byte(static_cast<char>(b));
            ++word.chars;
          }
          break;
      }
      continue;
    }
    const char32_t cp = utf8_decode(text, i);
    if constexpr (kOffsets) from.end = static_cast<uint32_t>(i);
    if (clean && unicode::is_bert_removed(cp)) continue;
    if (unicode::is_bert_whitespace(cp)) {
      flush();
      continue;
    }
    if (norm_.handle_chinese_chars && unicode::is_cjk_ideograph(cp)) {
      emit_single(cp);
      continue;
    }
    char32_t lowered[3];
    const int n_lower = lower ? unicode::to_lower_full(cp, lowered) : (lowered[0] = cp, 1);
    for (int k = 0; k < n_lower; ++k) {
      char32_t parts[32];
      const int n_parts = strip ? unicode::decompose_nfd(lowered[k], parts, 32) : (parts[0] = lowered[k], 1);
      for (int p = 0; p < n_parts; ++p) {
        const char32_t c = parts[p];
        if (strip && unicode::is_nonspacing_mark(c)) continue;
        if (unicode::is_bert_punctuation(c)) {
          emit_single(c);
        } else {
          add_char(c);
        }
      }
    }
  }
  flush();
}

std::vector<std::string> read_vocab_txt(const std::string& path) { return parse_vocab_txt(read_file(path), path); }

std::vector<std::string> parse_vocab_txt(std::string_view content, const std::string& path) {
  if (!utf8_is_valid(content)) {
    throw Error(Errc::format, path + ": vocabulary is not valid UTF-8 (expected one UTF-8 token per line)");
  }
  std::vector<std::string> vocab;
  size_t pos = 0;
  // Lines end at \n, \r\n or \r: Python reads vocab.txt in text mode, whose
  // universal newlines treat all three alike.
  while (pos < content.size()) {
    size_t end = content.find_first_of("\r\n", pos);
    if (end == std::string::npos) end = content.size();
    vocab.emplace_back(content.substr(pos, end - pos));
    pos = end + ((end + 1 < content.size() && content[end] == '\r' && content[end + 1] == '\n') ? 2 : 1);
  }
  if (vocab.empty()) throw Error(Errc::format, path + ": vocabulary is empty (expected one token per line)");
  if (vocab.size() > static_cast<size_t>(INT32_MAX))
    throw Error(Errc::format, path + ": vocabulary has more than 2^31 tokens");
  return vocab;
}

}  // namespace stoke
