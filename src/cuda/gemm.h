// GEMMs through cuBLASLt: out[M,N] (+)= a[M,K] · w[N,K]^T (+ bias[N]), the
// op table's `linear` without its activation. Row-major tensors are handed
// to cuBLASLt (column-major) as their transposes: out^T = w · a^T.
// Plans (descriptors and the algorithm cuBLASLt's heuristic picked) are
// cached per shape, dtypes and pointer alignment, so a steady run asks the
// heuristic once per shape.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <mutex>
#include <tuple>

#include "core/tensor.h"
#include "cuda/gemm_routes.h"

namespace stoke::cuda {

// cuBLASLt's data type for a dtype (f32, bf16, f16; anything else is a bug).
cudaDataType_t cuda_type(DType t);
// The largest power of two (up to 256) dividing every non-null operand's
// address: the plan cache keys on it, and cuBLASLt's heuristic must not pick
// a kernel the pointers cannot feed.
int alignment_of(std::initializer_list<const void*> ptrs);

class Gemm {
 public:
  Gemm(cublasLtHandle_t lt, void* workspace, size_t workspace_bytes, GemmFallbackCounter& fallbacks)
      : lt_(lt), ws_(workspace), ws_bytes_(workspace_bytes), fallbacks_(fallbacks) {}
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Enqueues the product on `stream`; with `accumulate`, adds it into out
  // (beta = 1, C = D = out: D = a·w^T + bias + out, the epilogue's bias and
  // the C term both added before the store). Returns true when the bias was
  // added (by cuBLASLt's epilogue, or by the plain kernel for shapes
  // cuBLASLt has no algorithm for); false when the caller must add it (the
  // epilogue is used only where cuBLASLt documents it: a bias of the
  // output's dtype).
  bool run(cudaStream_t stream, const TensorView& out, const TensorView& a, const TensorView& w,
           const TensorView& bias, bool accumulate);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t w = nullptr, a = nullptr, out = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool fused_bias = false;
    bool plain = false;  // no cuBLASLt algorithm: our plain kernel
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, int, int, int>;  // M N K, dtypes a w out bias, alignment
  Plan& plan(const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias);
  bool make_plan(Plan& p, const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias,
                 bool with_bias, int alignment);
  static void destroy(Plan& p);

  cublasLtHandle_t lt_;
  void* ws_;
  size_t ws_bytes_;
  GemmFallbackCounter& fallbacks_;
  std::mutex mu_;
  std::map<Key, Plan> plans_;
};

}  // namespace stoke::cuda
