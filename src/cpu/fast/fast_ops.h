// The fast CPU kernels (one file per op family); fast_kernels.cc puts them in
// the table. Same contract as the reference set, checked by the same
// cpu/ref/op_checks.
#pragma once

#include "backend/ops.h"

namespace stoke::cpu::fast {

// Every op of backend/op_list.h as a kernel of this set (contracts there),
// one file per op family: `void linear(const TensorView& out, ...);`.
#define STOKE_OP(op, params, args) void op params;
#include "backend/op_list.h"
#undef STOKE_OP

// For tests: run the GEMM as if the CPU had no native bf16 (bf16 inputs widened
// to f32), to cover that path on machines that do have it. Not thread-safe
// against concurrent linear calls; set it only around a test.
void set_linear_native_bf16_for_testing(bool allowed);
// For tests: run attention (and its training forward and backward) with
// vectors of 8 or 16 floats whatever the CPU (0: by the CPU, 16 with
// AVX-512), so the op tables cover both on one machine. Same thread-safety as
// the switch above.
void set_attention_vector_floats_for_testing(int floats);
// Primitives held in linear's cache (for tests of the bound).
size_t linear_cached_primitives();

}  // namespace stoke::cpu::fast
