#include "cpu/kernels.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu {

const Kernels& reference_kernels() {
  static const Kernels k{
      "cpu-ref", ref::linear,       ref::embed_layernorm, ref::residual_layernorm, ref::bias_gelu, ref::attention,
      ref::pool, ref::l2_normalize, ref::gather_rows,     ref::slice_columns,      ref::convert,
  };
  return k;
}

}  // namespace stoke::cpu
