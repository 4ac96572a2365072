#include "text/token_chunks.h"

#include <algorithm>

#include "core/error.h"
#include "core/utf8.h"
#include "text/tokenizer.h"
#include "text/unicode_props.h"

namespace stoke {

namespace {

// The code point that ends at byte `end` of s (0 when end == 0). Valid
// UTF-8 is not assumed: a stray continuation byte reads as itself.
char32_t code_point_before(std::string_view s, size_t end) {
  if (end == 0) return 0;
  size_t begin = end - 1;
  while (begin > 0 && end - begin < 4 && (static_cast<unsigned char>(s[begin]) & 0xC0) == 0x80) --begin;
  size_t i = begin;
  const char32_t c = utf8_decode(s.substr(0, end), i);
  return i == end ? c : static_cast<char32_t>(static_cast<unsigned char>(s[end - 1]));
}

char32_t code_point_at(std::string_view s, size_t at) {
  if (at >= s.size()) return 0;
  return utf8_decode(s, at);
}

bool is_sentence_terminator(char32_t c) {
  switch (c) {
    case U'.': case U'!': case U'?': case U'\u2026':             // Latin, Greek, Cyrillic ... and the ellipsis
    case U'\u3002': case U'\uFF01': case U'\uFF1F': case U'\uFF0E':  // CJK 。！？．
    case U'\u0964': case U'\u0965':                                // Devanagari danda, double danda
    case U'\u061F': case U'\u06D4':                                // Arabic question mark, full stop
    case U'\u0589': case U'\u1362':                                // Armenian, Ethiopic full stops
      return true;
    default:
      return false;
  }
}

// Terminators that end a sentence with no space after them (CJK text has none).
bool ends_sentence_without_space(char32_t c) {
  return c == U'\u3002' || c == U'\uFF01' || c == U'\uFF1F';
}

bool is_closing_mark(char32_t c) {
  switch (c) {
    case U'"': case U'\'': case U')': case U']': case U'}':
    case U'\u201D': case U'\u2019': case U'\u00BB': case U'\u300D': case U'\u300F': case U'\uFF09':
      return true;
    default:
      return false;
  }
}

// The bytes between token t - 1 and token t's first character that is not
// whitespace: what separates them in the text.
struct Gap {
  size_t begin = 0, end = 0;  // [begin, end) of the text
};

Gap gap_before(std::string_view text, std::span<const TokenOffset> offsets, size_t t) {
  Gap g;
  g.begin = std::min<size_t>(offsets[t - 1].end, text.size());
  size_t end = std::max<size_t>(g.begin, std::min<size_t>(offsets[t].start, text.size()));
  // A byte-level token keeps its leading space in its offsets (trim_offsets off).
  const size_t token_end = std::min<size_t>(offsets[t].end, text.size());
  while (end < token_end) {
    size_t next = end;
    const char32_t c = utf8_decode(text, next);
    if (!unicode::is_white_space(c)) break;
    end = next;
  }
  g.end = end;
  return g;
}

bool gap_has(std::string_view text, const Gap& g, bool (*pred)(char32_t)) {
  for (size_t i = g.begin; i < g.end;)
    if (pred(utf8_decode(text, i))) return true;
  return false;
}

bool is_line_break(char32_t c) { return c == U'\n' || c == U'\r' || c == U'\u2028' || c == U'\u2029'; }

bool gap_has_blank_line(std::string_view text, const Gap& g) {
  int breaks = 0;
  for (size_t i = g.begin; i < g.end;) {
    const char32_t c = utf8_decode(text, i);
    if (c == U'\u2029') return true;  // the paragraph separator
    if (c == U'\r' && i < g.end && text[i] == '\n') ++i;  // CRLF is one break
    if (is_line_break(c)) {
      if (++breaks == 2) return true;
    } else if (!unicode::is_white_space(c)) {
      breaks = 0;
    }
  }
  return false;
}

// Whether token t covers a character that is not whitespace. A token of
// spaces alone ("ĠĠĠ", SentencePiece's lone "▁" before a character it has no
// piece for) belongs to the word after it: no cut goes on either side of it.
bool has_content(std::string_view text, const TokenOffset& o) {
  const size_t end = std::min<size_t>(o.end, text.size());
  for (size_t i = std::min<size_t>(o.start, end); i < end;)
    if (!unicode::is_white_space(utf8_decode(text, i))) return true;
  return false;
}

bool is_word_start(std::string_view text, std::span<const TokenOffset> offsets, size_t t, const Gap& g) {
  // The tokens of one character (byte-level pieces of an emoji) share its
  // offsets and have no gap: never a word start.
  if (!has_content(text, offsets[t]) || !has_content(text, offsets[t - 1])) return false;
  if (offsets[t].start < offsets[t - 1].end) return false;
  if (gap_has(text, g, unicode::is_white_space)) return true;
  return unicode::is_cjk_ideograph(code_point_before(text, g.begin)) ||
         unicode::is_cjk_ideograph(code_point_at(text, g.end));
}

bool is_sentence_end(std::string_view text, const Gap& g, bool word_start) {
  if (word_start && gap_has(text, g, is_line_break)) return true;
  // The last character before the gap, past closing quotes and brackets.
  size_t end = g.begin;
  char32_t c = code_point_before(text, end);
  while (end > 0 && is_closing_mark(c)) {
    size_t back = end - 1;
    while (back > 0 && (static_cast<unsigned char>(text[back]) & 0xC0) == 0x80) --back;
    end = back;
    c = code_point_before(text, end);
  }
  if (!is_sentence_terminator(c)) return false;
  return word_start || ends_sentence_without_space(c);
}

// Code point index of byte `byte`, counted on from a cursor that only moves forward.
struct CharCursor {
  std::string_view text;
  size_t byte = 0;
  uint64_t chars = 0;
  uint64_t at(size_t target) {
    if (target < byte) {  // (chunks start in order; only an odd offset moves back)
      byte = 0;
      chars = 0;
    }
    while (byte < target && byte < text.size()) {
      utf8_decode(text, byte);
      ++chars;
    }
    return chars;
  }
};

TokenChunk chunk_of(std::span<const TokenOffset> offsets, size_t begin, size_t end, size_t text_bytes) {
  TokenChunk c;
  c.token_begin = static_cast<uint32_t>(begin);
  c.token_end = static_cast<uint32_t>(end);
  if (begin == end) {
    c.byte_begin = c.byte_end = begin < offsets.size() ? offsets[begin].start : text_bytes;
    return c;
  }
  uint64_t lo = offsets[begin].start, hi = offsets[begin].end;
  for (size_t t = begin; t < end; ++t) {
    lo = std::min<uint64_t>(lo, offsets[t].start);
    hi = std::max<uint64_t>(hi, offsets[t].end);
  }
  c.byte_begin = std::min<uint64_t>(lo, text_bytes);
  c.byte_end = std::min<uint64_t>(hi, text_bytes);
  return c;
}

// Splits text into pieces of at most `limit` bytes, each (but the first)
// starting at a run of whitespace; a piece with no whitespace in reach is cut
// at a character boundary.
std::vector<size_t> piece_starts(std::string_view text, size_t limit) {
  std::vector<size_t> starts = {0};
  size_t begin = 0;
  while (text.size() - begin > limit) {
    size_t cut = 0;
    for (size_t i = begin + limit; i > begin + limit / 2; --i) {
      const auto c = static_cast<unsigned char>(text[i]);
      const auto p = static_cast<unsigned char>(text[i - 1]);
      const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
      const bool prev_space = p == ' ' || p == '\n' || p == '\t' || p == '\r';
      if (space && !prev_space) {
        cut = i;
        break;
      }
    }
    if (cut == 0) {
      cut = begin + limit;
      while (cut > begin + 1 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    }
    starts.push_back(cut);
    begin = cut;
  }
  return starts;
}

}  // namespace

const char* chunk_boundary_name(ChunkBoundary b) {
  switch (b) {
    case ChunkBoundary::none: return "none";
    case ChunkBoundary::word: return "word";
    case ChunkBoundary::sentence: return "sentence";
    case ChunkBoundary::paragraph: return "paragraph";
  }
  return "none";
}

std::optional<ChunkBoundary> chunk_boundary_from_name(std::string_view name) {
  for (ChunkBoundary b : {ChunkBoundary::none, ChunkBoundary::word, ChunkBoundary::sentence, ChunkBoundary::paragraph})
    if (name == chunk_boundary_name(b)) return b;
  return std::nullopt;
}

void check_chunk_settings(const ChunkSettings& s) {
  if (s.tokens <= 0) throw Error(Errc::invalid_argument, "--chunk-tokens: expected a positive number");
  if (s.overlap < 0) throw Error(Errc::invalid_argument, "--chunk-overlap: expected 0 or more");
  if (s.overlap >= s.tokens)
    throw Error(Errc::invalid_argument, "--chunk-overlap " + std::to_string(s.overlap) +
                                            ": expected fewer tokens than --chunk-tokens " + std::to_string(s.tokens) +
                                            " (each chunk must move on by at least one token)");
}

bool is_chunk_boundary(std::string_view text, std::span<const TokenOffset> offsets, size_t t, ChunkBoundary kind) {
  if (kind == ChunkBoundary::none) return true;
  if (t == 0 || t >= offsets.size()) return false;
  const Gap g = gap_before(text, offsets, t);
  const bool word = is_word_start(text, offsets, t, g);
  if (kind == ChunkBoundary::paragraph) return word && gap_has_blank_line(text, g);
  if (kind == ChunkBoundary::word) return word;
  return is_sentence_end(text, g, word);
}

std::vector<TokenChunk> cut_chunks(std::string_view text, std::span<const TokenOffset> offsets,
                                   const ChunkSettings& settings, bool leading_space) {
  const size_t n = offsets.size(), N = static_cast<size_t>(settings.tokens), M = static_cast<size_t>(settings.overlap);
  std::vector<TokenChunk> chunks;
  CharCursor begin_chars{text}, end_chars{text};
  auto add = [&](size_t begin, size_t end) {
    TokenChunk c = chunk_of(offsets, begin, end, text.size());
    if (leading_space && c.byte_begin > 0 && c.byte_begin < c.byte_end && text[c.byte_begin - 1] == ' ' &&
        text[c.byte_begin] != ' ')
      --c.byte_begin;
    c.char_begin = begin_chars.at(c.byte_begin);
    c.char_end = end_chars.at(c.byte_end);
    chunks.push_back(c);
  };
  size_t start = 0;
  for (;;) {
    const size_t hard_end = std::min(start + N, n);
    if (hard_end == n) {
      add(start, n);
      return chunks;
    }
    // The cut goes back to the strongest boundary asked for that leaves the
    // next chunk room to move on (a cut c starts the next chunk at c - M,
    // which must be past this chunk's start); failing that a weaker one,
    // failing every one the window's end.
    size_t cut = hard_end;
    for (int kind = static_cast<int>(settings.boundary); kind > 0; --kind) {
      size_t found = 0;
      for (size_t c = hard_end; c > start + M; --c)
        if (is_chunk_boundary(text, offsets, c, static_cast<ChunkBoundary>(kind))) {
          found = c;
          break;
        }
      if (found) {
        cut = found;
        break;
      }
    }
    add(start, cut);
    start = cut - M;
  }
}

std::optional<DocumentTokens> tokenize_document(const Tokenizer& tokenizer, std::string_view prompt,
                                                std::string_view text, std::string* why) {
  DocumentTokens doc;
  doc.leading_space = tokenizer.kind() == TokenizerKind::bpe;
  const size_t limit = kMinPrefixBytes - prompt.size() - 4;
  const std::vector<size_t> starts = piece_starts(text, limit);
  for (size_t k = 0; k < starts.size(); ++k) {
    const size_t begin = starts[k], end = k + 1 < starts.size() ? starts[k + 1] : text.size();
    std::string piece = k == 0 ? std::string(prompt) : std::string();
    const size_t lead = piece.size();  // the prompt's bytes before the text's (first piece only)
    piece.append(text.substr(begin, end - begin));
    auto got = tokenizer.tokenize_with_offsets(piece);
    if (!got) {
      *why = "the tokenizer cannot give token offsets for this text, and chunking needs them (" + tokenizer.source +
             ")";
      return std::nullopt;
    }
    for (size_t i = 0; i < got->ids.size(); ++i) {
      const TokenOffset o = got->offsets[i];
      if (lead > 0 && o.start < lead && !(o.start == o.end && o.start == lead)) {
        doc.prompt_ids.push_back(got->ids[i]);
        continue;
      }
      const auto shift = [&](uint32_t at) {
        return static_cast<uint32_t>(std::max<size_t>(at, lead) - lead + begin);
      };
      doc.ids.push_back(got->ids[i]);
      doc.offsets.push_back({shift(o.start), shift(o.end)});
    }
  }
  return doc;
}

}  // namespace stoke
