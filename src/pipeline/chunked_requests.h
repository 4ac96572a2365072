// Chunked texts through the request batcher (docs/pipeline.md "Long
// documents"): what Python's Model.encode(chunk_tokens=...) and serve's
// /embed_chunks send and get back. The texts are cut as `stoke embed
// --chunk-tokens` cuts them (pipeline/text_chunks.h) and sent as token ids;
// plain chunks come back as pooled rows, late chunking's documents as their
// last hidden states, pooled per chunk span here on the host (mean, in
// double), then normalized as the model's rows are.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/encoder.h"
#include "pipeline/request_batcher.h"
#include "pipeline/text_chunks.h"

namespace stoke {

// The request to send: one item per sequence, and what each row will be.
struct ChunkedItems {
  ChunkOptions options;
  RowProduct product = RowProduct::pooled;  // tokens under late chunking
  std::vector<BatchItem> items;                 // token ids, specials and prompt included
  std::vector<uint32_t> row_text;               // each chunk row's input text
  std::vector<ChunkRow> rows;
  // Late chunking: row r pools token rows row_span[r] of item row_item[r].
  std::vector<uint32_t> row_item;
  std::vector<std::pair<int32_t, int32_t>> row_span;
};

// Late chunking pools each chunk's tokens from a pass over the whole
// document: a causal model's tokens see only what is before them, and
// last-token pooling reads one token, so neither gives a chunk its context.
// Throws Error(unsupported) naming why ("--late-chunking: ..."). Every
// interface that late-chunks asks this one function.
void check_late_chunking_model(const LoadedEncoder& encoder, Pooling pooling);

// Throws Error(invalid_argument) naming the text's index when it cannot be
// chunked, and Error(unsupported) for late chunking where this path cannot
// do it (a decoder with causal attention, last-token pooling, Dense modules
// after pooling: `stoke embed --late-chunking` runs those on the device).
ChunkedItems chunk_items(const Tokenizer& tokenizer, const LoadedEncoder& encoder, Pooling pooling,
                         std::span<const std::string> texts, const ChunkOptions& options, const std::string& prompt,
                         size_t max_length);

// The rows: one per chunk (or, with options.pool, one per text), in order.
struct ChunkedRows {
  std::vector<float> values;  // rows × width
  int64_t width = 0;
  std::vector<uint32_t> row_text;
  std::vector<ChunkRow> rows;
};

// From the done request's results (BatchRequest's values, width and, for
// tokens, row_offsets). `normalize`: the model's Normalize module (pooled
// rows already have it; late chunking's spans get it here).
ChunkedRows chunk_rows(const ChunkedItems& chunked, const std::vector<float>& values, int64_t width,
                       const std::vector<int64_t>& row_offsets, bool normalize);

}  // namespace stoke
