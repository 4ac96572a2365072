// The reference CPU kernels: the oracle every other backend is tested
// against. Plain loops, one element at a time, accumulation in double; inputs
// are read exactly (bf16/f16 widen without loss) and each result is rounded
// once, to float and then to the output dtype, when it is stored. Speed does
// not matter here; being obviously right does. Checks: backend/op_checks.h.
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

// Every op of backend/op_list.h as a kernel of this set (contracts there),
// one file per op family: `void linear(const TensorView& out, ...);`.
#define STOKE_OP(op, params, args) void op params;
#include "backend/op_list.h"
#undef STOKE_OP

}  // namespace stoke::cpu::ref
