#include "pipeline/chunked_requests.h"

#include <cmath>

#include "core/error.h"

namespace stoke {


void check_late_chunking_model(const LoadedEncoder& encoder, Pooling pooling) {
  if (encoder.config.arch->family == LayerFamily::decoder && encoder.config.causal)
    throw Error(Errc::unsupported, "--late-chunking: " + encoder.config.model_type_name +
                                       " is a decoder, whose attention is causal: a chunk's tokens would see only the "
                                       "text before them, not their context; use plain --chunk-tokens");
  if (pooling == Pooling::lasttoken)
    throw Error(Errc::unsupported, "--late-chunking: last-token pooling reads one token of the text, which a chunk's "
                                   "span does not have; use plain --chunk-tokens");
}

ChunkedItems chunk_items(const Tokenizer& tok, const LoadedEncoder& encoder, Pooling pooling,
                         std::span<const std::string> texts, const ChunkOptions& options, const std::string& prompt,
                         size_t max_length) {
  check_chunk_settings(options.settings);
  check_chunks_fit(tok, options, prompt, max_length);
  ChunkedItems out;
  out.options = options;
  if (options.late) {
    check_late_chunking_model(encoder, pooling);
    if (!encoder.dense.empty())
      throw Error(Errc::unsupported, "late chunking: this model has Dense modules after its pooling, which this "
                                     "path does not run on pooled spans; `stoke embed --late-chunking` does");
    out.product = RowProduct::tokens;
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    TextChunks c = chunk_text(tok, options, prompt, max_length, texts[i]);
    if (!c.error.empty()) throw Error(Errc::invalid_argument, "input " + std::to_string(i) + ": " + c.error);
    const auto first_item = static_cast<uint32_t>(out.items.size());
    for (Encoding& e : c.sequences) {
      BatchItem item;
      item.ids = std::move(e.ids);
      out.items.push_back(std::move(item));
    }
    for (size_t r = 0; r < c.rows.size(); ++r) {
      out.row_text.push_back(static_cast<uint32_t>(i));
      out.rows.push_back(c.rows[r]);
      if (!options.late) continue;
      // The row's sequence: the last one whose first row is at or before it.
      uint32_t s = 0;
      while (s + 1 < c.seq_first_row.size() && c.seq_first_row[s + 1] <= r) ++s;
      out.row_item.push_back(first_item + s);
      out.row_span.push_back(c.row_span[r]);
    }
  }
  return out;
}

ChunkedRows chunk_rows(const ChunkedItems& chunked, const std::vector<float>& values, int64_t width,
                       const std::vector<int64_t>& row_offsets, bool normalize) {
  ChunkedRows out;
  out.width = width;
  const auto W = static_cast<size_t>(width);
  const size_t n = chunked.rows.size();
  std::vector<float> rows(n * W);
  if (chunked.product == RowProduct::pooled) {
    if (values.size() != n * W) throw Error(Errc::internal, "chunked request: rows and chunks differ");
    rows = values;
  } else {
    // Late chunking: each span's token states averaged, then normalized.
    for (size_t r = 0; r < n; ++r) {
      const int64_t base = row_offsets[chunked.row_item[r]];
      const auto [b, e] = chunked.row_span[r];
      std::vector<double> acc(W, 0.0);
      for (int32_t t = b; t < e; ++t) {
        const float* h = values.data() + static_cast<size_t>(base + t) * W;
        for (size_t c = 0; c < W; ++c) acc[c] += h[c];
      }
      for (size_t c = 0; c < W; ++c) rows[r * W + c] = static_cast<float>(acc[c] / std::max(1, e - b));
      if (normalize) pool_chunk_rows(rows.data() + r * W, 1, width, ChunkPooling::mean, true, rows.data() + r * W);
    }
  }
  if (chunked.options.pool == ChunkPooling::none) {
    out.values = std::move(rows);
    out.row_text = chunked.row_text;
    out.rows = chunked.rows;
    return out;
  }
  for (size_t r = 0; r < n;) {
    size_t end = r;
    while (end < n && chunked.row_text[end] == chunked.row_text[r]) ++end;
    out.values.resize(out.values.size() + W);
    float* dst = out.values.data() + out.values.size() - W;
    pool_chunk_rows(rows.data() + r * W, end - r, width, chunked.options.pool, normalize, dst);
    ChunkRow row;
    row.count = static_cast<uint32_t>(end - r);
    const TokenChunk& a = chunked.rows[r].span;
    const TokenChunk& z = chunked.rows[end - 1].span;
    row.span = {a.token_begin, z.token_end, a.byte_begin, z.byte_end, a.char_begin, z.char_end};
    row.pooled = true;
    out.rows.push_back(row);
    out.row_text.push_back(chunked.row_text[r]);
    r = end;
  }
  return out;
}

}  // namespace stoke
