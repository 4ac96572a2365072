#include "model/packed_batch.h"

#include <algorithm>

#include "core/error.h"

namespace stoke {

void PackedBatch::clear() {
  ids.clear();
  type_ids.clear();
  positions.clear();
  cu_seqlens.assign(1, 0);
  max_seqlen = 0;
}

void PackedBatch::add(std::span<const int32_t> seq_ids, std::span<const int32_t> seq_types, const HfConfig& config) {
  if (cu_seqlens.empty()) cu_seqlens.push_back(0);
  const bool roberta_positions = config.arch->positions == PositionScheme::after_padding;
  const bool rotary = config.arch->positions == PositionScheme::rotary;
  const int32_t pad = static_cast<int32_t>(config.pad_token_id);
  int32_t counted = 0;
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    ids.push_back(seq_ids[i]);
    type_ids.push_back(i < seq_types.size() ? seq_types[i] : 0);
    if (rotary) {
      positions.push_back(0);  // the one-row zero table's row; the rotary op numbers tokens itself
    } else if (!roberta_positions) {
      positions.push_back(static_cast<int32_t>(i));
    } else if (seq_ids[i] == pad) {
      positions.push_back(pad);
    } else {
      positions.push_back(pad + (++counted));
    }
  }
  cu_seqlens.push_back(static_cast<int32_t>(ids.size()));
  max_seqlen = std::max(max_seqlen, static_cast<int32_t>(seq_ids.size()));
}

void check_packed_batch(const PackedBatch& b, const HfConfig& c) {
  // The structure first: a GPU reads these offsets on the device, unchecked.
  const size_t T = b.ids.size();
  if (b.type_ids.size() != T || b.positions.size() != T || b.cu_seqlens.empty() || b.cu_seqlens.front() != 0 ||
      b.cu_seqlens.back() != static_cast<int64_t>(T))
    throw Error(Errc::invalid_argument, "malformed packed batch: ids, type ids, positions and cu_seqlens disagree");
  for (size_t i = 0; i + 1 < b.cu_seqlens.size(); ++i) {
    const int64_t len = int64_t{b.cu_seqlens[i + 1]} - b.cu_seqlens[i];
    if (len < 0 || len > b.max_seqlen)
      throw Error(Errc::invalid_argument, "malformed packed batch: sequence " + std::to_string(i) + " has " +
                                              std::to_string(len) + " tokens, max_seqlen is " +
                                              std::to_string(b.max_seqlen));
  }
  for (size_t t = 0; t < b.ids.size(); ++t) {
    if (b.ids[t] < 0 || b.ids[t] >= c.vocab_size)
      throw Error(Errc::invalid_argument, "token id " + std::to_string(b.ids[t]) + " is outside the vocabulary (0.." +
                                              std::to_string(c.vocab_size - 1) + ")");
    if (b.positions[t] < 0 || b.positions[t] >= c.max_position_embeddings)
      throw Error(Errc::invalid_argument, "position " + std::to_string(b.positions[t]) +
                                              " is past the model's max_position_embeddings " +
                                              std::to_string(c.max_position_embeddings));
    if (b.type_ids[t] < 0 || b.type_ids[t] >= std::max<int64_t>(c.type_vocab_size, 1))
      throw Error(Errc::invalid_argument, "token type id " + std::to_string(b.type_ids[t]) +
                                              " is past type_vocab_size " + std::to_string(c.type_vocab_size));
  }
}

}  // namespace stoke
