#include "cpu/fast/fast_ops.h"
#include "cpu/fast/fast_train.h"
#include "cpu/kernels.h"

namespace stoke::cpu {

const Kernels& fast_kernels() {
  static const Kernels k{
      "cpu",      fast::linear,       fast::embed_layernorm, fast::residual_layernorm, fast::bias_gelu, fast::attention,
      fast::pool, fast::l2_normalize, fast::gather_rows,     fast::slice_columns,      fast::convert,
      // --- training: dropout, loss, optimizer
      fast::dropout, fast::dropout_backward, fast::cross_entropy, fast::mse_loss, fast::sum_squares, fast::clip_scale,
      fast::adamw,
  };
  return k;
}

}  // namespace stoke::cpu
