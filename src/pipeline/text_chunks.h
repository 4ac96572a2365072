// A text's chunks as sequences for the encoder (docs/pipeline.md "Long
// documents"): the chunk options every interface shares (embed's flags,
// Python's Model.encode, serve's /embed_chunks), and one text cut into the
// sequences the device runs and the rows they give — a sequence per chunk,
// or under late chunking the whole document (in macro-windows when longer
// than the max length) with each chunk a span of its token rows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/token_chunks.h"
#include "text/tokenizer.h"

namespace stoke {

// Long documents (docs/pipeline.md "Long documents"): each record's tokens
// cut into chunks (text/token_chunks.h), each chunk a row of its own.
enum class ChunkPooling { none, mean, max };
const char* chunk_pooling_name(ChunkPooling p);
// The word for a pooling ("none", "mean", "max"); nullopt otherwise.
std::optional<ChunkPooling> chunk_pooling_from_name(std::string_view name);
inline constexpr const char* kChunkPoolingWords = "none, mean or max";
struct ChunkOptions {
  ChunkSettings settings;   // settings.tokens == 0: no chunking
  // Late chunking: the document runs as one sequence (macro-windows when it
  // is longer than the model's max length) and each chunk's row is the mean
  // of its tokens' states from that pass, then the Dense modules and
  // normalization as for a pooled text.
  bool late = false;
  // One row per record instead: its chunks' rows pooled (mean or max), then
  // normalized when the model's rows are.
  ChunkPooling pool = ChunkPooling::none;
  bool on() const { return settings.on(); }
};

// What a chunked run's row is: one chunk of its record, or (pooled) all of them.
struct ChunkRow {
  uint32_t index = 0, count = 1;  // chunk `index` of the record's `count`
  TokenChunk span;                // its tokens, bytes and characters in the record's text
  uint64_t tokens = 0;            // tokens the model ran for it (specials and prompt included)
  bool pooled = false;            // --pool-chunks: the record's chunks pooled into this row
};

// One text's sequences and rows, made on a tokenizer thread.
struct TextChunks {
  std::vector<Encoding> sequences;  // what the device runs (specials and prompt included)
  std::vector<ChunkRow> rows;       // one per chunk, in order
  // Late chunking: sequence s gives the rows from seq_first_row[s] to the
  // next sequence's first (the last: to rows.size()); row r pools the token
  // rows row_span[r] of its sequence.
  std::vector<uint32_t> seq_first_row;
  std::vector<std::pair<int32_t, int32_t>> row_span;
  std::string error;  // the tokenizer cannot give this text's offsets: a bad record
};

// Cuts `text` (the prompt's tokens put before each chunk). Throws
// Error(invalid_argument) when a chunk with the prompt and the special
// tokens passes max_length (0: no limit).
TextChunks chunk_text(const Tokenizer& tokenizer, const ChunkOptions& options, std::string_view prompt,
                      size_t max_length, std::string_view text);

// Throws Error(invalid_argument) when N + the prompt's tokens + the special
// tokens pass max_length: every chunk must fit as a text of its own.
void check_chunks_fit(const Tokenizer& tokenizer, const ChunkOptions& options, std::string_view prompt,
                      size_t max_length);

// --pool-chunks: n rows of `width` into one (mean or max per column, in
// double), then L2-normalized when `normalize`.
void pool_chunk_rows(const float* rows, size_t n, int64_t width, ChunkPooling mode, bool normalize, float* out);

}  // namespace stoke
