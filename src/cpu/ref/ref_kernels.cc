#include "cpu/kernels.h"
#include "cpu/ref/ref_backward.h"
#include "cpu/ref/ref_ops.h"
#include "cpu/ref/ref_train.h"

namespace stoke::cpu {

const Kernels& reference_kernels() {
  static const Kernels k{
      "cpu-ref", ref::linear,       ref::embed_layernorm, ref::residual_layernorm, ref::bias_gelu, ref::attention,
      ref::pool, ref::l2_normalize, ref::gather_rows,     ref::slice_columns,      ref::convert,
      // --- training: forward variants that keep what backward needs, and backward ops
      ref::linear_backward, ref::residual_layernorm_train, ref::layernorm_backward, ref::embed_layernorm_train,
      ref::embed_layernorm_backward, ref::bias_gelu_train, ref::bias_gelu_backward, ref::tanh_backward,
      ref::attention_train, ref::attention_backward, ref::gather_rows_backward, ref::pool_backward, ref::add,
      // --- end of training ops
      // --- training: dropout, loss, optimizer
      ref::dropout, ref::dropout_backward, ref::cross_entropy, ref::mse_loss, ref::sum_squares, ref::clip_scale,
      ref::adamw,
  };
  return k;
}

}  // namespace stoke::cpu
