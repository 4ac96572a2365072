// The last stage of a tokenizer.json pipeline: one pre-tokenized word in,
// ids out (Unigram, BPE). PipelineModel (pipeline_model.h) runs the
// normalizer and pre-tokenizer in front of it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/aligned_text.h"
#include "text/encode_stats.h"

namespace stoke {

class WordModel {
 public:
  virtual ~WordModel() = default;
  virtual void encode_word(std::string_view word, std::vector<int32_t>& out, EncodeStats& stats) const = 0;
  // encode_word, also appending each id's byte range in `word` (as HF's
  // model gives it) to `offsets`. Only for offsets (TEI's /tokenize).
  virtual void encode_word_with_offsets(std::string_view word, std::vector<int32_t>& out,
                                        std::vector<TokenOffset>& offsets, EncodeStats& stats) const = 0;
  virtual std::string id_to_token(int32_t id) const = 0;
  virtual int32_t token_to_id(std::string_view token) const = 0;  // -1 when absent
  virtual int64_t vocab_size() const = 0;
  virtual std::string describe() const = 0;
};

}  // namespace stoke
