// Which way the CUDA backend runs each GEMM, decided from the operands' dtypes
// alone. Plain C++ (no CUDA headers), so the CPU tests check the decision for
// every GEMM of a training step without a GPU (tests/unit/test_gemm_routes.cc);
// the table in docs/cuda.md is this file in words.
//
// cuBLASLt multiplies two operands of ONE dtype (f32, bf16, f16) into an
// output of that dtype or f32, accumulating in f32. The trainer's gradients
// are f32 while its weights and activations are 16-bit in bf16/f16 training,
// so the backward's `da = dy·w` and `dw += dy^T·a` meet f32 dy against 16-bit
// w and a: dy is rounded to the 16-bit dtype first (what torch.autocast's
// backward multiplies, and what the CPU backend does with native bf16),
// then cuBLASLt runs on the tensor cores with f32 accumulation into the f32
// gradient. Any other mix would take the plain kernel — one thread per
// output, a serial K loop, ~1% of the tensor cores' rate — and is counted.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"

namespace stoke::cuda {

enum class GemmRoute {
  cublaslt,             // the operands as they are
  cublaslt_16bit_copy,  // the f32 operand rounded into a 16-bit workspace, then cuBLASLt
  plain,                // the plain kernel (kernels_gemm_fallback.cu): slow, counted
};

inline const char* gemm_route_name(GemmRoute r) {
  switch (r) {
    case GemmRoute::cublaslt: return "cuBLASLt";
    case GemmRoute::cublaslt_16bit_copy: return "cuBLASLt after rounding the f32 operand to 16 bits";
    case GemmRoute::plain: return "plain kernel";
  }
  return "?";
}

inline bool is_16bit(DType t) { return t == DType::bf16 || t == DType::f16; }
inline bool is_gemm_float(DType t) { return t == DType::f32 || is_16bit(t); }

// c = op(x) · op(y), c (+)= with beta = 1: the backward's products.
inline GemmRoute general_gemm_route(DType x, DType y, DType c) {
  if (!is_gemm_float(x) || !is_gemm_float(y) || !is_gemm_float(c)) return GemmRoute::plain;
  if (x == y) return c == DType::f32 || c == x ? GemmRoute::cublaslt : GemmRoute::plain;
  const bool one_f32 = (x == DType::f32) != (y == DType::f32);
  const DType low = x == DType::f32 ? y : x;  // the 16-bit one, when one_f32
  if (one_f32 && (c == DType::f32 || c == low)) return GemmRoute::cublaslt_16bit_copy;
  return GemmRoute::plain;  // bf16 against f16, or an output of a third dtype
}

// The dtype the f32 operand of a cublaslt_16bit_copy product is rounded to.
inline DType gemm_copy_dtype(DType x, DType y) { return x == DType::f32 ? y : x; }

// The forward's out = a · w^T (+ bias): a and w of one dtype (the CUDA
// linear op refuses others), out in it or f32.
inline GemmRoute linear_route(DType out, DType a, DType w) {
  if (a != w || !is_gemm_float(a)) return GemmRoute::plain;
  return out == a || out == DType::f32 ? GemmRoute::cublaslt : GemmRoute::plain;
}

// Rows of an [M, N] dy that one 16-bit copy of `workspace_bytes` holds:
// a multiple of 256 where at least 256 fit (chunk starts keep the operands'
// alignment), else as many as fit; 0 when not one row does (then the
// products take the plain kernel, counted).
inline int64_t dy_chunk_rows(size_t workspace_bytes, int64_t N, size_t element_bytes) {
  if (N <= 0) return 0;
  const int64_t fit = static_cast<int64_t>(workspace_bytes / (static_cast<size_t>(N) * element_bytes));
  return fit >= 256 ? fit / 256 * 256 : fit;
}

// "M4096 N768 K3072 BF16*F32->F32": how a fallback is named in reports.
inline std::string gemm_shape_name(int64_t M, int64_t N, int64_t K, DType a, DType b, DType c) {
  // Appended piece by piece: GCC 12's -Wrestrict misreads `"M" + std::to_string(M)`.
  std::string s;
  for (const std::string& part : {std::string("M"), std::to_string(M), std::string(" N"), std::to_string(N),
                                  std::string(" K"), std::to_string(K), std::string(" "), std::string(dtype_name(a)),
                                  std::string("*"), std::string(dtype_name(b)), std::string("->"),
                                  std::string(dtype_name(c))})
    s += part;
  return s;
}

// Every GEMM that took the plain kernel, by what asked for it ("linear",
// "linear_backward dw"), shape and why: counted when enqueued (a captured
// graph counts its capture once, not its replays). Thread-safe.
class GemmFallbackCounter {
 public:
  using Entry = Backend::GemmFallback;
  void count(const std::string& op, const std::string& shape, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[op + '\n' + shape + '\n' + why];
    if (e.calls++ == 0) e = Entry{op, shape, why, 1};
  }
  std::vector<Entry> entries() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Entry> out;
    for (const auto& [key, e] : entries_) out.push_back(e);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

}  // namespace stoke::cuda
