#include "model/pooling_mode.h"

namespace stoke {

PoolingMode pooling_mode(Pooling pooling) {
  switch (pooling) {
    case Pooling::cls: return PoolingMode::cls;
    case Pooling::mean: return PoolingMode::mean;
    case Pooling::max: return PoolingMode::max;
    case Pooling::mean_sqrt_len: return PoolingMode::mean_sqrt_len;
    case Pooling::lasttoken: return PoolingMode::lasttoken;
  }
  return PoolingMode::mean;
}

}  // namespace stoke
