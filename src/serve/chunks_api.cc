// POST /embed_chunks, stoke's own route for long texts (docs/serve.md): each
// input cut into chunks as `stoke embed --chunk-tokens` cuts them, and each
// chunk's vector with where it came from — TEI's /embed has no such answer
// (it truncates, or with truncate=false refuses an over-long text).
//
//   {"inputs": "text" | ["text", ...], "chunk_tokens": N, "chunk_overlap": M,
//    "chunk_boundary": "none|word|sentence|paragraph", "late_chunking": false,
//    "pool_chunks": "none|mean|max", "normalize": true, "dimensions": D,
//    "prompt_name": NAME}
//   -> [{"index": i, "chunks": [{"chunk": k, "embedding": [...],
//        "tokens": [b, e], "bytes": [b, e], "chars": [b, e]}, ...]}, ...]
//
// With pool_chunks mean|max each input's one row: {"index": i, "chunks": n, "embedding": [...]}.
#include <memory>

#include "pipeline/chunked_requests.h"
#include "serve/embedding_rows.h"
#include "serve/request_json.h"
#include "serve/response_json.h"
#include "serve/routes.h"

namespace stoke::serve {

namespace dom = simdjson::dom;

namespace {

// A word field read with its vocabulary's from_name (absent: the fallback).
template <typename T, typename FromName>
T word_field(dom::object body, const char* field, T fallback, FromName from_name, const char* words) {
  const auto given = string_field(body, field);
  if (!given) return fallback;
  if (const auto v = from_name(*given)) return *v;
  throw validation_error(std::string(field) + " \"" + *given + "\": expected " + words, field);
}

void append_span(std::string& out, const char* key, uint64_t begin, uint64_t end) {
  out += ",\"";
  out += key;
  out += "\":[" + std::to_string(begin) + "," + std::to_string(end) + "]";
}

}  // namespace

void stoke_embed_chunks(Call& call) {
  const dom::object body = parse_object(call.request.body());
  InputLimits limits;
  limits.max_inputs = static_cast<size_t>(call.options().max_client_batch_size);
  limits.vocab_size = call.model().tokenizer().vocab_size();
  limits.allow_ids = false;  // chunks need the text: spans index it
  std::vector<BatchItem> inputs = parse_inputs(required_field(body, "inputs"), "inputs", limits);
  ChunkOptions o;
  const auto tokens = int_field(body, "chunk_tokens");
  if (!tokens) throw validation_error("chunk_tokens: required (the chunks' length in tokens)", "chunk_tokens");
  o.settings.tokens = *tokens;
  o.settings.overlap = int_field(body, "chunk_overlap").value_or(0);
  o.settings.boundary = word_field(body, "chunk_boundary", ChunkBoundary::none, chunk_boundary_from_name, kChunkBoundaryWords);
  o.late = bool_field(body, "late_chunking", false);
  o.pool = word_field(body, "pool_chunks", ChunkPooling::none, chunk_pooling_from_name, kChunkPoolingWords);
  const bool normalize = bool_field(body, "normalize", true);
  const int64_t width = call.model().width();
  const int64_t dims = checked_dimensions(int_field(body, "dimensions"), width, "dimensions");
  const std::string prompt = call.model().prompt_for(string_field(body, "prompt_name"));
  std::vector<std::string> texts;
  texts.reserve(inputs.size());
  for (BatchItem& item : inputs) texts.push_back(std::move(item.text));
  const ModelSession& s = call.model().session();
  auto chunked = std::make_shared<ChunkedItems>();
  try {
    *chunked = chunk_items(*s.text.tokenizer, s.encoder, call.model().pooling(), texts, o, prompt,
                           static_cast<size_t>(call.model().max_length()));
  } catch (const Error& e) {
    if (e.code() == Errc::unsupported) throw ApiError(424, "Backend", e.what());
    throw validation_error(e.what());
  }
  BatchRequestOptions ro;
  ro.product = chunked->product;
  std::vector<BatchItem> items = std::move(chunked->items);
  chunked->items.clear();
  const bool model_normalizes = call.model().model_normalizes();
  call.run_batch(std::move(items), ro, [chunked, normalize, dims, model_normalizes, n = texts.size()](BatchResult& r) {
    const ChunkedRows rows = chunk_rows(*chunked, r.values, r.width, r.row_offsets, model_normalizes);
    std::string out = "[";
    std::vector<float> row;
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
      if (i) out.push_back(',');
      out += "{\"index\":" + std::to_string(i) + ",\"chunks\":";
      if (chunked->options.pool != ChunkPooling::none) {
        out += std::to_string(rows.rows[k].count) + ",\"embedding\":";
        shape_row(rows.values.data() + k * static_cast<size_t>(rows.width), dims, normalize, row);
        append_float_array(out, row.data(), row.size());
        out += "}";
        ++k;
        continue;
      }
      out.push_back('[');
      for (bool first = true; k < rows.rows.size() && rows.row_text[k] == i; ++k, first = false) {
        const ChunkRow& c = rows.rows[k];
        if (!first) out.push_back(',');
        out += "{\"chunk\":" + std::to_string(c.index) + ",\"embedding\":";
        shape_row(rows.values.data() + k * static_cast<size_t>(rows.width), dims, normalize, row);
        append_float_array(out, row.data(), row.size());
        append_span(out, "tokens", c.span.token_begin, c.span.token_end);
        append_span(out, "bytes", c.span.byte_begin, c.span.byte_end);
        append_span(out, "chars", c.span.char_begin, c.span.char_end);
        out.push_back('}');
      }
      out += "]}";
    }
    out.push_back(']');
    return out;
  });
}

}  // namespace stoke::serve
