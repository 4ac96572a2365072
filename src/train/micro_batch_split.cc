#include "train/micro_batch_split.h"

#include <algorithm>
#include <functional>

namespace stoke::train {

int64_t chunk_examples(int64_t batch, int halvings) {
  int64_t n = std::max<int64_t>(batch, 1);
  for (int i = 0; i < halvings && n > 1; ++i) n = (n + 1) / 2;
  return n;
}

int64_t workspace_tokens(std::vector<int64_t> lengths, int64_t examples) {
  const size_t n = std::min(lengths.size(), static_cast<size_t>(std::max<int64_t>(examples, 0)));
  std::partial_sort(lengths.begin(), lengths.begin() + static_cast<long>(n), lengths.end(), std::greater<>());
  int64_t tokens = 0;
  for (size_t i = 0; i < n; ++i) tokens += lengths[i];
  return tokens;
}

std::string memory_halving_note(int64_t batch, int halvings) {
  return "the device had no room for batch " + std::to_string(batch) + ": continuing with micro-batches of " +
         std::to_string(chunk_examples(batch, halvings)) + " (halved " +
         (halvings == 1 ? std::string("once") : std::to_string(halvings) + " times") + ")";
}

}  // namespace stoke::train
