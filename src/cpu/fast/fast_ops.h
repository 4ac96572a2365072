// The fast CPU kernels (one file per op family); fast_kernels.cc puts them in
// the table. Same contract as the reference set, checked by the same
// cpu/ref/op_checks.
#pragma once

#include "backend/ops.h"

namespace stoke::cpu::fast {

void linear(const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias, Activation act);
void bias_gelu(const TensorView& x, const TensorView& bias);
void embed_layernorm(const TensorView& out, const TensorView& ids, const TensorView& positions,
                     const TensorView& type_ids, const TensorView& word, const TensorView& pos, const TensorView& type,
                     const TensorView& gamma, const TensorView& beta, float eps, const TensorView& out_low);
void residual_layernorm(const TensorView& out, const TensorView& x, const TensorView& residual, const TensorView& gamma,
                        const TensorView& beta, float eps, const TensorView& out_low);
void attention(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads, int max_seqlen);
void pool(const TensorView& out, const TensorView& h, const TensorView& cu_seqlens, PoolingMode mode);
void l2_normalize(const TensorView& x);
void gather_rows(const TensorView& out, const TensorView& h, const TensorView& rows);
void slice_columns(const TensorView& out, const TensorView& in);
void convert(const TensorView& out, const TensorView& in);

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
