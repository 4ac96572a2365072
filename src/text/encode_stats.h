// Counters a tokenizer keeps while it encodes: the summary reports them, and
// tests use `lookups` to check that work stays linear in the input.
#pragma once

#include <cstdint>

namespace stoke {

struct EncodeStats {
  uint64_t lookups = 0;        // vocabulary trie steps (WordPiece) or pieces (SentencePiece)
  uint64_t replaced_utf8 = 0;  // invalid UTF-8 subparts replaced by U+FFFD
  uint64_t truncated = 0;      // texts (or pairs) cut to max_length
  uint64_t capped = 0;         // texts cut at kUntruncatedTextBytes though truncation was off (tokenizer.h)
  uint64_t encoded_bytes = 0;  // bytes of text handed to the subword model

  void add(const EncodeStats& o) {
    lookups += o.lookups;
    replaced_utf8 += o.replaced_utf8;
    truncated += o.truncated;
    capped += o.capped;
    encoded_bytes += o.encoded_bytes;
  }
};

}  // namespace stoke
