// Token-exact chunking of long texts (docs/pipeline.md "Long documents"): a
// text's tokens, as the tokenizer gives them for the whole text, are cut
// into windows of at most N tokens that overlap by exactly M tokens, each
// cut moved back to the last word, sentence or paragraph end inside the
// window when one is asked for and there is one. Every chunk knows its
// token span and its byte and character span in the original text, so a
// user can cut the chunk's text out of the source without stoke.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/aligned_text.h"

namespace stoke {

class Tokenizer;

// Where a cut may go. Each kind includes the stronger ones: a paragraph end
// is also a sentence end and a word start.
enum class ChunkBoundary { none, word, sentence, paragraph };
const char* chunk_boundary_name(ChunkBoundary b);
// The word for a boundary ("none", "word", "sentence", "paragraph"); nullopt otherwise.
std::optional<ChunkBoundary> chunk_boundary_from_name(std::string_view name);
inline constexpr const char* kChunkBoundaryWords = "none, word, sentence or paragraph";

struct ChunkSettings {
  int64_t tokens = 0;   // N: tokens per chunk at most (0: no chunking)
  int64_t overlap = 0;  // M: tokens shared by two neighbouring chunks (< N)
  ChunkBoundary boundary = ChunkBoundary::none;
  bool on() const { return tokens > 0; }
};

// One chunk of a text: tokens [token_begin, token_end) of the text's tokens
// (specials and prompt excluded), bytes [byte_begin, byte_end) and code
// points [char_begin, char_end) (Python str indices) of the original text.
struct TokenChunk {
  uint32_t token_begin = 0, token_end = 0;
  uint64_t byte_begin = 0, byte_end = 0;
  uint64_t char_begin = 0, char_end = 0;
  bool operator==(const TokenChunk&) const = default;
};

// Cuts a text of offsets.size() tokens (offsets: each token's bytes in
// `text`, as Tokenizer::tokenize_with_offsets gives them). Always at least
// one chunk: an empty text is one empty chunk. Settings must be valid
// (check_chunk_settings).
//
// A chunk's ids are the text's ids in that span, as the tokenizer gave them
// in context. Cut at whitespace (any boundary but none, on text with
// spaces), they are also the ids of the span's text tokenized alone; a cut
// with no whitespace (boundary none inside a word, CJK text) keeps the
// in-context pieces ("##ing"), which the span's text alone may not give.
// leading_space: the tokenizer's tokens carry the space before them
// (byte-level BPE: "Ġword", whose offsets trim_offsets may leave without
// it); a chunk's span then starts at that one space, so that the span's text
// tokenizes to the chunk's ids.
std::vector<TokenChunk> cut_chunks(std::string_view text, std::span<const TokenOffset> offsets,
                                   const ChunkSettings& settings, bool leading_space = false);

// Throws Error(invalid_argument) naming the flag: N > 0, 0 <= M < N.
void check_chunk_settings(const ChunkSettings& settings);

// Whether a cut before token t (0 < t < offsets.size()) falls at a boundary
// of `kind` (exposed for tests). Word: whitespace between the tokens, or a
// CJK ideograph on either side. Sentence: a word start after . ! ? … (or
// their CJK, Devanagari, Arabic, Armenian and Ethiopic forms, possibly
// followed by closing quotes or brackets), or a line break; a CJK full stop
// needs no space after it. Paragraph: a blank line between the tokens.
bool is_chunk_boundary(std::string_view text, std::span<const TokenOffset> offsets, size_t t, ChunkBoundary kind);

// A text's tokens for chunking: the prompt's ids (put before every chunk),
// then the text's own ids with their byte offsets into `text`.
struct DocumentTokens {
  bool leading_space = false;  // for cut_chunks: byte-level BPE tokens carry the space before them
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> ids;
  std::vector<TokenOffset> offsets;  // one per id, into the text (the prompt not counted)
};

// Tokenizes prompt + text as the unchunked path does (one string), then
// splits off the prompt's tokens (those that start inside it). A text over
// the tokenizer's offset limit (kMinPrefixBytes) is tokenized in pieces cut
// just before a run of whitespace, where every pre-tokenizer stoke has
// starts a new word, so the ids are those of the whole text. nullopt with
// *why when the tokenizer cannot give offsets for this text.
std::optional<DocumentTokens> tokenize_document(const Tokenizer& tokenizer, std::string_view prompt,
                                                std::string_view text, std::string* why);

}  // namespace stoke
