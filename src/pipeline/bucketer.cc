#include "pipeline/bucketer.h"

#include <algorithm>
#include <numeric>

namespace stoke {

std::vector<std::vector<uint32_t>> cut_batches(std::span<const int64_t> lengths, int64_t batch_tokens,
                                               int64_t max_batch_size) {
  std::vector<uint32_t> order(lengths.size());
  std::iota(order.begin(), order.end(), uint32_t{0});
  // Stable: equal lengths keep input order, so the batches never depend on the sort's whims.
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return lengths[a] > lengths[b]; });
  std::vector<std::vector<uint32_t>> batches;
  std::vector<uint32_t> members;
  int64_t tokens = 0;
  for (uint32_t i : order) {
    if (!members.empty() &&
        (tokens + lengths[i] > batch_tokens || static_cast<int64_t>(members.size()) >= max_batch_size)) {
      batches.push_back(std::move(members));
      members = {};
      tokens = 0;
    }
    members.push_back(i);
    tokens += lengths[i];
  }
  if (!members.empty()) batches.push_back(std::move(members));
  return batches;
}

}  // namespace stoke
