// The reference CPU kernels: the oracle every other backend is tested
// against. Plain loops, one element at a time, accumulation in double; inputs
// are read exactly (bf16/f16 widen without loss) and each result is rounded
// once, to float and then to the output dtype, when it is stored. Speed does
// not matter here; being obviously right does.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/ops.h"

namespace stoke::cpu::ref {

// Element i (flat, row-major) of a float tensor (f32/bf16/f16), exactly.
double load(const TensorView& t, int64_t i);
// Stores v into element i: rounded to float, then to the tensor's dtype.
void store(const TensorView& t, int64_t i, double v);
int32_t index_at(const TensorView& t, int64_t i);

inline double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double activate(double x, Activation act);

// LayerNorm of one row in place: (x - mean) / sqrt(var + eps) * gamma + beta,
// with the biased variance (divide by H), statistics in double.
void layernorm_row(double* x, int64_t H, const TensorView& gamma, const TensorView& beta, float eps);

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

}  // namespace stoke::cpu::ref
