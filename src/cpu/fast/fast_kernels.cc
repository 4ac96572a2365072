#include "cpu/fast/fast_ops.h"
#include "cpu/kernels.h"

namespace stoke::cpu {

// Every op's entry by name, generated from backend/op_list.h: a kernel
// missing from fast:: does not compile.
const Kernels& fast_kernels() {
  static const Kernels k{
      .name = "cpu",
#define STOKE_OP(op, params, args) .op = fast::op,
#include "backend/op_list.h"
#undef STOKE_OP
  };
  return k;
}

}  // namespace stoke::cpu
