#include "core/philox.h"

namespace stoke::philox {

void fill_uniform(uint64_t seed, uint32_t step, uint32_t tensor_id, uint64_t first, int64_t n, float* out) {
  int64_t i = 0;
  while (i < n) {
    const uint64_t e = first + static_cast<uint64_t>(i);
    uint32_t w[4];
    block_bits(seed, step, tensor_id, e >> 2, w);
    // The rest of this block (all 4 words unless we start or end inside it).
    for (uint64_t j = e & 3; j < 4 && i < n; ++j, ++i) out[i] = uniform(w[j]);
  }
}

}  // namespace stoke::philox
