#include "train/loss_scaler.h"

#include <cmath>

namespace stoke {

bool unscale_and_check(std::span<float> grads, float inv_scale) {
  bool found_inf = false;
  for (float& g : grads) {
    if (!std::isfinite(g)) found_inf = true;
    g *= inv_scale;
  }
  return found_inf;
}

}  // namespace stoke
