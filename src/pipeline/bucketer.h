// How a sort window becomes batches: longest first (the batch that needs the
// most memory comes first, and each batch holds texts of similar length), cut
// whenever the next text would pass the token budget or the batch is full. A
// text longer than the budget gets a batch of its own. Deterministic: the same
// lengths always give the same batches (resume relies on it).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace stoke {

// lengths[i]: tokens of text i. Returns batches of indices into `lengths`.
std::vector<std::vector<uint32_t>> cut_batches(std::span<const int64_t> lengths, int64_t batch_tokens,
                                               int64_t max_batch_size);

}  // namespace stoke
