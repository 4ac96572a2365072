#include "model/family_trainer.h"

#include <algorithm>

#include "model/layer_sequence.h"

namespace stoke {

Ops::AttentionDropout TrainStep::attn_drop(int64_t l) const {
  return Ops::AttentionDropout{knobs.dropout.attention, knobs.seed, layer_step, SequenceTraining::site(l, 0),
                               knobs.token_offset};
}

TrainSlab train_slab(Backend& backend, DType t, int64_t rows, int64_t cols) {
  TrainSlab s;
  s.dtype = t;
  s.cols = cols;
  s.buf = backend.allocate(static_cast<size_t>(std::max<int64_t>(rows * cols, 1)) * dtype_size(t));
  return s;
}

}  // namespace stoke
