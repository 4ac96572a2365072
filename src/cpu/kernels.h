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

// The int8 GEMM (linear_int8): what the CPU's integer dot product is, and so
// how many levels an activation code has (backend/op_list.h). With VNNI
// (avx512_vnni, avx_vnni) or AMX-INT8, u8 x s8 products sum straight into
// int32: 8-bit activations, u8 codes 0..255. Without, oneDNN pairs them
// through a saturating 16-bit sum (vpmaddubsw): 7-bit activations, codes
// 0..127, so 2 * 127 * 127 < 2^15 never saturates — exact, a little less
// accurate, and not faster than f32 there.
struct Int8ActivationCode {
  int levels;  // u8 codes 0..levels: 255 or 127
};
Int8ActivationCode cpu_int8_activation_code();
bool cpu_has_int8_dot();  // VNNI or AMX-INT8
// "int8 (AMX)", "int8 (AVX512-VNNI)", "int8 (AVX-VNNI)" or "int8 without VNNI (7-bit activations)".
const char* cpu_int8_support();

// For tests: pretend the CPU lacks what it has (false), or detect again
// (true). cpu_has_native_bf16 / cpu_has_int8_dot and everything derived from
// them (the activation code, the messages) answer as for such a CPU; the
// GEMM's own dispatch is oneDNN's (ONEDNN_MAX_CPU_ISA limits it for real).
// Set only around a test, not while kernels run.
void set_cpu_native_bf16_for_testing(bool present);
void set_cpu_int8_dot_for_testing(bool present);

}  // namespace stoke::cpu
