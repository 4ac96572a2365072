// Out of memory during training (RELIABILITY 10): a micro-batch that does not
// fit is run as 2^k consecutive chunks, accumulated into the same gradient
// with the same loss weight (1 / examples of the optimizer step) and the same
// dropout keys (each chunk passes its place in the micro-batch as the token
// and sequence offsets, as a data-parallel slice does). So the optimizer step
// sees the same examples, learning rate and data order, and a split step
// computes the unsplit update up to the order of its gradient sums.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stoke::train {

// Examples per chunk of a `batch`-example micro-batch halved `halvings` times
// (at least 1).
int64_t chunk_examples(int64_t batch, int halvings);

// Tokens the training workspace needs for `examples` examples: the longest
// ones side by side (the largest micro-batch the data can make).
int64_t workspace_tokens(std::vector<int64_t> lengths, int64_t examples);

// "the device had no room for batch 64: continuing with micro-batches of 32 (halved once)"
std::string memory_halving_note(int64_t batch, int halvings);

}  // namespace stoke::train
