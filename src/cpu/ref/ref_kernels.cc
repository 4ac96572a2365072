#include "cpu/kernels.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu {

// Every op's entry by name, generated from backend/op_list.h: a kernel
// missing from ref:: does not compile.
const Kernels& reference_kernels() {
  static const Kernels k{
      .name = "cpu-ref",
#define STOKE_OP(op, params, args) .op = ref::op,
#include "backend/op_list.h"
#undef STOKE_OP
  };
  return k;
}

}  // namespace stoke::cpu
