#include "pipeline/text_chunks.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace stoke {

namespace {

// Tokens the template puts before a single sequence ([CLS], <s>).
size_t leading_specials(const Tokenizer& tok) {
  size_t n = 0;
  for (const TemplatePiece& p : tok.post_processor().single) {
    if (p.is_sequence) break;
    n += p.ids.size();
  }
  return n;
}

std::string too_long(const ChunkOptions& o, size_t prompt, size_t specials, size_t max) {
  const auto N = static_cast<size_t>(o.settings.tokens);
  return "--chunk-tokens " + std::to_string(N) + " with the prompt's " + std::to_string(prompt) + " and " +
         std::to_string(specials) + " special tokens is " + std::to_string(N + prompt + specials) +
         ", more than the max length " + std::to_string(max) + "; use --chunk-tokens " +
         std::to_string(max > prompt + specials ? max - prompt - specials : 0) + " or less";
}

// The document's tokens [begin, end) after the prompt's, inside the template.
Encoding sequence_of(const Tokenizer& tok, const DocumentTokens& doc, size_t begin, size_t end) {
  std::vector<int32_t> ids = doc.prompt_ids;
  ids.insert(ids.end(), doc.ids.begin() + static_cast<std::ptrdiff_t>(begin),
             doc.ids.begin() + static_cast<std::ptrdiff_t>(end));
  return tok.with_special_tokens(ids);
}

}  // namespace

const char* chunk_pooling_name(ChunkPooling p) {
  switch (p) {
    case ChunkPooling::none: return "none";
    case ChunkPooling::mean: return "mean";
    case ChunkPooling::max: return "max";
  }
  return "none";
}

std::optional<ChunkPooling> chunk_pooling_from_name(std::string_view name) {
  for (ChunkPooling p : {ChunkPooling::none, ChunkPooling::mean, ChunkPooling::max})
    if (name == chunk_pooling_name(p)) return p;
  return std::nullopt;
}

void check_chunks_fit(const Tokenizer& tok, const ChunkOptions& o, std::string_view prompt, size_t max) {
  const size_t prompt_tokens = prompt.empty() ? 0 : tok.tokenize(prompt).size();
  const size_t specials = tok.special_tokens_added(false);
  if (max > 0 && static_cast<size_t>(o.settings.tokens) + prompt_tokens + specials > max)
    throw Error(Errc::invalid_argument, too_long(o, prompt_tokens, specials, max));
}

TextChunks chunk_text(const Tokenizer& tok, const ChunkOptions& o, std::string_view prompt, size_t max,
                      std::string_view text) {
  TextChunks out;
  std::string why;
  auto doc = tokenize_document(tok, prompt, text, &why);
  if (!doc) {
    out.error = why;
    return out;
  }
  const std::vector<TokenChunk> cuts = cut_chunks(text, doc->offsets, o.settings, doc->leading_space);
  const auto count = static_cast<uint32_t>(cuts.size());
  for (uint32_t k = 0; k < count; ++k) {
    ChunkRow row;
    row.index = k;
    row.count = count;
    row.span = cuts[k];
    out.rows.push_back(row);
  }
  const size_t specials = tok.special_tokens_added(false);
  // (A prompt that tokenizes longer inside the text than alone still gets a clear error.)
  if (max > 0 && static_cast<size_t>(o.settings.tokens) + doc->prompt_ids.size() + specials > max)
    throw Error(Errc::invalid_argument, too_long(o, doc->prompt_ids.size(), specials, max));
  if (!o.late) {
    for (ChunkRow& row : out.rows) {
      out.sequences.push_back(sequence_of(tok, *doc, row.span.token_begin, row.span.token_end));
      row.tokens = out.sequences.back().ids.size();
    }
    return out;
  }
  // Late chunking: the document as one sequence when it fits the max
  // length, else macro-windows of the room there is. Each chunk is pooled
  // from the first macro-window holding all of it; a macro-window after the
  // first starts up to one chunk's length before its first chunk, so that
  // chunk sees context on its left too. A macro-window's spans stop at
  // twice its tokens (the workspace the runner keeps for them).
  const size_t N = static_cast<size_t>(o.settings.tokens), n = doc->ids.size();
  const size_t fixed = doc->prompt_ids.size() + specials;
  const size_t window = max > 0 ? max - fixed : std::max(n, N);
  const size_t context = window > N ? std::min(N, window - N) : 0;
  const size_t lead = leading_specials(tok) + doc->prompt_ids.size();
  size_t next = 0;  // the first chunk not pooled yet
  while (next < cuts.size()) {
    const size_t first_token = cuts[next].token_begin;
    const size_t begin = next == 0 ? 0 : first_token - std::min(first_token, context);
    const size_t end = std::min(n, begin + window);
    out.seq_first_row.push_back(static_cast<uint32_t>(next));
    out.sequences.push_back(sequence_of(tok, *doc, begin, end));
    const auto seq_len = static_cast<int32_t>(out.sequences.back().ids.size());
    int64_t rows = 0;
    while (next < cuts.size() && cuts[next].token_end <= end) {
      const TokenChunk& c = cuts[next];
      const int64_t len = c.token_begin == c.token_end ? seq_len : static_cast<int64_t>(c.token_end - c.token_begin);
      if (rows > 0 && rows + len > 2 * static_cast<int64_t>(window)) break;
      rows += len;
      if (c.token_begin == c.token_end) {
        out.row_span.emplace_back(0, seq_len);  // an empty text: its specials
      } else {
        out.row_span.emplace_back(static_cast<int32_t>(lead + c.token_begin - begin),
                                  static_cast<int32_t>(lead + c.token_end - begin));
      }
      out.rows[next].tokens = c.token_end - c.token_begin;
      ++next;
    }
  }
  return out;
}

void pool_chunk_rows(const float* rows, size_t n, int64_t width, ChunkPooling mode, bool normalize, float* out) {
  const auto W = static_cast<size_t>(width);
  for (size_t c = 0; c < W; ++c) {
    double acc = mode == ChunkPooling::max ? rows[c] : 0.0;
    for (size_t r = 0; r < n; ++r) {
      const double v = rows[r * W + c];
      acc = mode == ChunkPooling::max ? std::max(acc, v) : acc + v;
    }
    out[c] = static_cast<float>(mode == ChunkPooling::max ? acc : acc / static_cast<double>(n));
  }
  if (!normalize) return;
  double norm = 0;
  for (size_t c = 0; c < W; ++c) norm += static_cast<double>(out[c]) * out[c];
  norm = std::sqrt(norm);
  if (norm > 0)
    for (size_t c = 0; c < W; ++c) out[c] = static_cast<float>(out[c] / norm);
}

}  // namespace stoke
