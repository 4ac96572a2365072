// The fast CPU kernels (one file per op family); fast_kernels.cc puts them in
// the table. Same contract as the reference set, checked by the same
// cpu/ref/op_checks.
#pragma once

#include "backend/ops.h"
#include "cpu/int8_rows.h"
#include "cpu/kernels.h"

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
// The integer GEMM under linear_int8: out[M,N] = a[M,K] (u8) · w[N,K]^T
// (s8, nn.Linear layout), summed in int32 by oneDNN (cached primitive per
// shape, as linear's). Exact wherever the activation code keeps the CPU's
// intermediate sums from saturating (cpu/kernels.h). K > 0.
void gemm_u8s8s32(const uint8_t* a, const int8_t* w, int32_t* out, int64_t M, int64_t N, int64_t K);
// linear_int8's per-row quantization, vectorised: the bytes and code of
// cpu::quantize_row (cpu/int8_rows.h) exactly.
RowCode quantize_row_fast(const float* x, int64_t K, Int8ActivationCode code, uint8_t* q);
// Primitives held in linear's cache (for tests of the bound).
size_t linear_cached_primitives();

}  // namespace stoke::cpu::fast
