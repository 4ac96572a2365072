// The backward pass's GEMMs through cuBLASLt: c[M,N] = op(a) · op(b), or
// c += op(a) · op(b) (dW accumulation: beta = 1 with C = the gradient), row
// major, op(x) = x^T where asked. Plans are cached per shape, transposes,
// dtypes and alignment, as Gemm's. Operand mixes cuBLASLt does not take
// (gemm_routes.h: the caller rounds an f32 dy to 16 bits first, see
// linear_backward_gemms.h) and shapes with no algorithm go to a plain
// kernel (kernels.h), counted.
//
// Reproducibility: for a fixed shape, plan and workspace, cuBLASLt's result
// is the same run to run on one GPU model (no atomics are asked for); it
// may differ between GPU models, as any GEMM library's.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "core/tensor.h"
#include "cuda/gemm_routes.h"

namespace stoke::cuda {

class GemmGeneral {
 public:
  GemmGeneral(cublasLtHandle_t lt, void* workspace, size_t workspace_bytes, GemmFallbackCounter& fallbacks)
      : lt_(lt), ws_(workspace), ws_bytes_(workspace_bytes), fallbacks_(fallbacks) {}
  ~GemmGeneral();
  GemmGeneral(const GemmGeneral&) = delete;
  GemmGeneral& operator=(const GemmGeneral&) = delete;

  // `what` names the product in the fallback count ("linear_backward dw").
  void run(cudaStream_t stream, const char* what, const TensorView& c, const TensorView& a, bool trans_a,
           const TensorView& b, bool trans_b, bool accumulate);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool plain = false;
  };
  // M N K, trans a/b, accumulate, dtypes a b c, alignment
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, int, int, int, int>;
  bool make_plan(Plan& p, const Key& k);
  static void destroy(Plan& p);

  cublasLtHandle_t lt_;
  void* ws_;
  size_t ws_bytes_;
  GemmFallbackCounter& fallbacks_;
  std::mutex mu_;
  std::map<Key, Plan> plans_;
};

}  // namespace stoke::cuda
