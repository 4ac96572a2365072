// The order an epoch visits the training examples, cut into batches — a pure
// function of (seed, epoch), so a resumed run sees exactly the batches an
// uninterrupted one would have seen.
//
// - shuffle + group by length (the default): a seeded permutation, split into
//   mega-batches of 50 batches, each sorted longest first, the mega-batch
//   holding the longest example moved to the front (transformers'
//   LengthGroupedSampler: similar lengths share a batch, so packed batches
//   hold similar token counts, and the largest batch comes first, so running
//   out of memory happens at once or never);
// - shuffle without grouping: the permutation alone;
// - no shuffle: file order, never regrouped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stoke::train {

struct BatchOrderOptions {
  bool shuffle = true;
  bool group_by_length = true;
  int64_t batch_size = 8;
  uint64_t seed = 42;
};

inline constexpr int64_t kMegaBatchBatches = 50;  // transformers' mega-batch multiplier

// 0..n-1 in the order of a Fisher-Yates shuffle with Philox draws keyed by
// (seed, epoch): the same on every machine and standard library.
std::vector<uint32_t> seeded_permutation(size_t n, uint64_t seed, int64_t epoch);

// Batches of example indices (the last one may be smaller).
std::vector<std::vector<uint32_t>> epoch_batches(const std::vector<int64_t>& lengths, const BatchOrderOptions& options,
                                                 int64_t epoch);

}  // namespace stoke::train
