// CPU kernels: synchronous functions on host memory with the semantics of the
// op table (contracts in backend/op_list.h). Two complete sets exist: reference (plain loops,
// the oracle, src/cpu/ref) and fast (oneDNN GEMM, vectorised and threaded
// kernels, src/cpu/fast). The CPU backend picks one set once, when it is made.
#pragma once

#include "backend/ops.h"

namespace stoke::cpu {

// The table of one kernel set, one function pointer per op of
// backend/op_list.h (contracts there). Filled by name, never by position: a
// set's table is designated initializers generated from the list
// (ref_kernels.cc, fast_kernels.cc), so a missing or misnamed kernel is a
// compile error and two neighbours of one type cannot be swapped. Each set
// declares its kernels from the same list (cpu/ref/ref_ops.h,
// cpu/fast/fast_ops.h).
struct Kernels {
  const char* name;
#define STOKE_OP(op, params, args) void(*op) params;
#include "backend/op_list.h"
#undef STOKE_OP
};

const Kernels& reference_kernels();
const Kernels& fast_kernels();

// What the fast GEMM runs on this CPU, detected once at run time:
// "bf16 (AMX)", "bf16 (AVX512-BF16)" or "f32 only".
const char* cpu_bf16_support();
bool cpu_has_native_bf16();

}  // namespace stoke::cpu
