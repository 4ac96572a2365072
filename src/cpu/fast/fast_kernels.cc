#include "cpu/fast/fast_ops.h"
#include "cpu/kernels.h"

namespace stoke::cpu {

const Kernels& fast_kernels() {
  static const Kernels k{
      "cpu",      fast::linear,       fast::embed_layernorm, fast::residual_layernorm, fast::bias_gelu, fast::attention,
      fast::pool, fast::l2_normalize, fast::gather_rows,     fast::slice_columns,      fast::convert,
  };
  return k;
}

}  // namespace stoke::cpu
