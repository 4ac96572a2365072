#include "cpu/fast/fast_backward.h"
#include "cpu/fast/fast_ops.h"
#include "cpu/fast/fast_train.h"
#include "cpu/kernels.h"

namespace stoke::cpu {

const Kernels& fast_kernels() {
  static const Kernels k{
      "cpu",      fast::linear,       fast::embed_layernorm, fast::residual_layernorm, fast::bias_gelu, fast::attention,
      fast::pool, fast::l2_normalize, fast::gather_rows,     fast::slice_columns,      fast::convert,
      // --- training: forward variants that keep what backward needs, and backward ops
      fast::linear_backward, fast::residual_layernorm_train, fast::layernorm_backward, fast::embed_layernorm_train,
      fast::embed_layernorm_backward, fast::bias_gelu_train, fast::bias_gelu_backward, fast::tanh_backward,
      fast::attention_train, fast::attention_backward, fast::gather_rows_backward, fast::pool_backward, fast::add,
      // --- end of training ops
      // --- training: dropout, loss, optimizer
      fast::dropout, fast::dropout_backward, fast::cross_entropy, fast::mse_loss, fast::sum_squares, fast::clip_scale,
      fast::adamw,
  };
  return k;
}

}  // namespace stoke::cpu
