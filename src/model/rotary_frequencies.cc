#include "model/rotary_frequencies.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace stoke {

std::vector<float> default_rope_inv_freq(int64_t rotary_dim, double theta) {
  if (rotary_dim < 2 || rotary_dim % 2 != 0)
    throw Error(Errc::invalid_argument, fmt::format("rotary dimension {}: expected an even number >= 2", rotary_dim));
  if (!(theta > 0.0) || !std::isfinite(theta))
    throw Error(Errc::invalid_argument, fmt::format("rope_theta {}: expected a finite number > 0", theta));
  std::vector<float> inv_freq(static_cast<size_t>(rotary_dim / 2));
  const float base = static_cast<float>(theta), dim = static_cast<float>(rotary_dim);
  for (int64_t i = 0; i < rotary_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / dim;  // torch: arange(0, dim, 2).float() / dim
    inv_freq[static_cast<size_t>(i)] = 1.0f / std::pow(base, exponent);
  }
  return inv_freq;
}

}  // namespace stoke
