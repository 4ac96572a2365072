// A batch of tokenized sequences packed end to end, as the encoder consumes
// it: no padding anywhere. Sequence b owns tokens [cu_seqlens[b], cu_seqlens[b+1]).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "io/hf_config.h"

namespace stoke {

struct PackedBatch {
  std::vector<int32_t> ids;         // (T)
  std::vector<int32_t> type_ids;    // (T)
  std::vector<int32_t> positions;   // (T)
  std::vector<int32_t> cu_seqlens;  // (B + 1), cu_seqlens[0] = 0
  int32_t max_seqlen = 0;

  int64_t tokens() const { return static_cast<int64_t>(ids.size()); }
  int64_t sequences() const { return cu_seqlens.empty() ? 0 : static_cast<int64_t>(cu_seqlens.size()) - 1; }
  void clear();
  // Appends one sequence; positions follow the model's rule:
  // BERT counts 0, 1, 2, ...; RoBERTa / XLM-R count from pad_id + 1 and give
  // pad tokens the position pad_id without counting them (transformers'
  // create_position_ids_from_input_ids).
  void add(std::span<const int32_t> ids, std::span<const int32_t> type_ids, const HfConfig& config);
};

// Refuses (Error invalid_argument) an id outside the vocabulary, a position
// past the position table or a type id past the type table — checked on the
// host before any kernel runs (on a GPU an out-of-range gather is a sticky fault).
void check_packed_batch(const PackedBatch& batch, const HfConfig& config);

}  // namespace stoke
