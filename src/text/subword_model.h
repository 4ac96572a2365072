// The part of a tokenizer that turns one span of plain text (no special-token
// strings inside) into ids: BERT's normalizer + pre-tokenizer + WordPiece, or
// SentencePiece. The Tokenizer around it handles special tokens, templates,
// pairs and truncation, the same way for both.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/aligned_text.h"
#include "text/encode_stats.h"

namespace stoke {

class SubwordModel {
 public:
  virtual ~SubwordModel() = default;
  // Appends the ids of `text` (valid UTF-8) to `out`.
  virtual void encode(std::string_view text, std::vector<int32_t>& out, EncodeStats& stats) const = 0;
  // Appends the pieces as strings (the "tokens" of HF's tokenize()).
  virtual std::string id_to_token(int32_t id) const = 0;
  // Number of ids the model can produce (largest id + 1), added tokens excluded.
  virtual int64_t vocab_size() const = 0;
  // The id of a token string, or -1.
  virtual int32_t token_to_id(std::string_view token) const = 0;
  // "WordPiece" or "SentencePiece (unigram)"...
  virtual std::string describe() const = 0;

  // Added tokens with normalized: true are matched on normalized text, so
  // the Tokenizer needs the normalizer apart from the rest:
  // encode_segment(t) == encode_normalized(normalize(t)). `at_input_start`:
  // the span begins the whole input (Metaspace's prepend_scheme "first").
  // Models whose normalizer is idempotent (WordPiece's BertNormalizer) keep
  // the defaults; SentencePiece normalizes inside libsentencepiece.
  virtual bool has_normalizer() const { return false; }
  virtual std::string normalize(std::string_view text) const { return std::string(text); }
  virtual void encode_segment(std::string_view text, bool at_input_start, std::vector<int32_t>& out,
                              EncodeStats& stats) const {
    (void)at_input_start;
    encode(text, out, stats);
  }
  virtual void encode_normalized(std::string_view normalized, bool at_input_start, std::vector<int32_t>& out,
                                 EncodeStats& stats) const {
    encode_segment(normalized, at_input_start, out, stats);
  }
  // As encode_segment(text, ...), also appending each id's byte range in
  // `text` (through normalization) to `offsets`. Only asked for (TEI's
  // /tokenize), never on the encode path. False, with nothing appended, when
  // this model cannot tell (then offsets are unknown); a model whose
  // encode_segment depends on at_input_start implements
  // encode_segment_with_offsets instead.
  virtual bool encode_with_offsets(std::string_view text, std::vector<int32_t>& out,
                                   std::vector<TokenOffset>& offsets, EncodeStats& stats) const {
    (void)text, (void)out, (void)offsets, (void)stats;
    return false;
  }
  virtual bool encode_segment_with_offsets(std::string_view text, bool at_input_start, std::vector<int32_t>& out,
                                           std::vector<TokenOffset>& offsets, EncodeStats& stats) const {
    (void)at_input_start;
    return encode_with_offsets(text, out, offsets, stats);
  }
  // For added tokens matched on normalized text (has_normalizer()): the
  // normalized text with each byte's range in `text`, and encode_normalized
  // with offsets into that original (through normalized.align). False: unknown.
  virtual bool normalize_aligned(std::string_view text, AlignedText& normalized) const {
    (void)text, (void)normalized;
    return false;
  }
  virtual bool encode_aligned(const AlignedText& normalized, bool at_input_start, std::vector<int32_t>& out,
                              std::vector<TokenOffset>& offsets, EncodeStats& stats) const {
    (void)normalized, (void)at_input_start, (void)out, (void)offsets, (void)stats;
    return false;
  }
};

}  // namespace stoke
