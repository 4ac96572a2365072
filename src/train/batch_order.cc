#include "train/batch_order.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"

namespace stoke::train {

// std::shuffle's order is unspecified: this one is fixed.
std::vector<uint32_t> seeded_permutation(size_t n, uint64_t seed, int64_t epoch) {
  std::vector<uint32_t> p(n);
  std::iota(p.begin(), p.end(), 0u);
  for (size_t i = n; i > 1; --i) {
    uint32_t w[4];
    philox::block_bits(seed, 0xFFFFFFFEu, static_cast<uint32_t>(epoch), static_cast<uint64_t>(i), w);
    const uint64_t r = (static_cast<uint64_t>(w[0]) << 32) | w[1];
    std::swap(p[i - 1], p[static_cast<size_t>(r % i)]);
  }
  return p;
}

std::vector<std::vector<uint32_t>> epoch_batches(const std::vector<int64_t>& lengths, const BatchOrderOptions& o,
                                                 int64_t epoch) {
  if (o.batch_size <= 0) throw Error(Errc::invalid_argument, "batch size must be positive");
  const size_t n = lengths.size();
  std::vector<uint32_t> order;
  if (!o.shuffle) {
    order.resize(n);
    std::iota(order.begin(), order.end(), 0u);
  } else {
    order = seeded_permutation(n, o.seed, epoch);
    if (o.group_by_length) {
      const size_t mega = static_cast<size_t>(o.batch_size * kMegaBatchBatches);
      std::vector<std::pair<size_t, size_t>> megas;  // [begin, end) of order
      for (size_t b = 0; b < n; b += mega) megas.push_back({b, std::min(n, b + mega)});
      // Longest first inside each (stable: ties keep the permutation's order).
      for (auto [b, e] : megas)
        std::stable_sort(order.begin() + static_cast<long>(b), order.begin() + static_cast<long>(e),
                         [&](uint32_t x, uint32_t y) { return lengths[x] > lengths[y]; });
      // The mega-batch whose first (longest) example is the longest overall goes first.
      size_t best = 0;
      for (size_t m = 1; m < megas.size(); ++m)
        if (lengths[order[megas[m].first]] > lengths[order[megas[best].first]]) best = m;
      if (best != 0) {
        std::vector<uint32_t> moved(order.begin() + static_cast<long>(megas[best].first),
                                    order.begin() + static_cast<long>(megas[best].second));
        order.erase(order.begin() + static_cast<long>(megas[best].first),
                    order.begin() + static_cast<long>(megas[best].second));
        order.insert(order.begin(), moved.begin(), moved.end());
      }
    }
  }
  std::vector<std::vector<uint32_t>> batches;
  const size_t bs = static_cast<size_t>(o.batch_size);
  for (size_t b = 0; b < n; b += bs)
    batches.emplace_back(order.begin() + static_cast<long>(b), order.begin() + static_cast<long>(std::min(n, b + bs)));
  return batches;
}

}  // namespace stoke::train
