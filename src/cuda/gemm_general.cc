#include "cuda/gemm_general.h"

#include "core/error.h"
#include "cuda/cuda_internal.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"

namespace stoke::cuda {

GemmGeneral::~GemmGeneral() {
  for (auto& [key, p] : plans_) destroy(p);
}

void GemmGeneral::destroy(Plan& p) {
  if (p.op) cublasLtMatmulDescDestroy(p.op);
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  p = Plan{};
}

// Row-major c = op(a) op(b) is column-major c^T = op(b)^T op(a)^T: cuBLASLt's
// first operand is our b, its second our a. A row-major [r, k] tensor is a
// column-major k x r matrix with leading dimension k.
bool GemmGeneral::make_plan(Plan& p, const Key& k) {
  const auto [M, N, K, trans_a, trans_b, accumulate, a_dt, b_dt, c_dt, alignment] = k;
  (void)accumulate;
  const uint64_t m = static_cast<uint64_t>(M), n = static_cast<uint64_t>(N), kk = static_cast<uint64_t>(K);
  check_cublas(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t op_first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_cublas(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)),
               "cublasLtMatmulDescSetAttribute");
  check_cublas(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)),
               "cublasLtMatmulDescSetAttribute");
  // b: stored [K, N] (layout N x K) or, transposed, [N, K] (layout K x N).
  if (trans_b)
    check_cublas(cublasLtMatrixLayoutCreate(&p.b, cuda_type(static_cast<DType>(b_dt)), kk, n, static_cast<int64_t>(kk)), "layout b");
  else
    check_cublas(cublasLtMatrixLayoutCreate(&p.b, cuda_type(static_cast<DType>(b_dt)), n, kk, static_cast<int64_t>(n)), "layout b");
  // a: stored [M, K] (layout K x M) or, transposed, [K, M] (layout M x K).
  if (trans_a)
    check_cublas(cublasLtMatrixLayoutCreate(&p.a, cuda_type(static_cast<DType>(a_dt)), m, kk, static_cast<int64_t>(m)), "layout a");
  else
    check_cublas(cublasLtMatrixLayoutCreate(&p.a, cuda_type(static_cast<DType>(a_dt)), kk, m, static_cast<int64_t>(kk)), "layout a");
  check_cublas(cublasLtMatrixLayoutCreate(&p.c, cuda_type(static_cast<DType>(c_dt)), n, m, static_cast<int64_t>(n)), "layout c");
  cublasLtMatmulPreference_t pref = nullptr;
  check_cublas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const uint32_t align = static_cast<uint32_t>(alignment);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes_, sizeof(ws_bytes_));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.b, p.a, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    destroy(p);
    return false;
  }
  p.algo = result.algo;
  return true;
}

void GemmGeneral::run(cudaStream_t stream, const char* what, const TensorView& c, const TensorView& a, bool trans_a,
                      const TensorView& b, bool trans_b, bool accumulate) {
  const int64_t M = c.dim(0), N = c.dim(1), K = trans_a ? a.dim(0) : a.dim(1);
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate) check_cuda(cudaMemsetAsync(c.data, 0, c.bytes(), stream), "cudaMemsetAsync");
    return;
  }
  auto plain = [&](const char* why) {
    fallbacks_.count(what, gemm_shape_name(M, N, K, a.dtype, b.dtype, c.dtype), why);
    launch_plain_gemm_general(stream, c, a, trans_a, b, trans_b, accumulate);
  };
  if (general_gemm_route(a.dtype, b.dtype, c.dtype) != GemmRoute::cublaslt) {
    plain("operand mix cuBLASLt does not take");
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  const Key key{M, N, K, trans_a, trans_b, accumulate, static_cast<int>(a.dtype), static_cast<int>(b.dtype),
                static_cast<int>(c.dtype), alignment_of({a.data, b.data, c.data})};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    if (plans_.size() >= 4096) {
      for (auto& [k, p] : plans_) destroy(p);
      plans_.clear();
    }
    Plan p;
    if (!make_plan(p, key)) p.plain = true;
    it = plans_.emplace(key, p).first;
  }
  Plan& p = it->second;
  if (p.plain) {
    plain("cuBLASLt found no algorithm");
    return;
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const cublasStatus_t status = cublasLtMatmul(lt_, p.op, &alpha, b.data, p.b, a.data, p.a, &beta, c.data, p.c,
                                               c.data, p.c, &p.algo, ws_, ws_bytes_, stream);
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) {
    check_cublas(status, "cublasLtMatmul");
    return;
  }
  destroy(p);
  p.plain = true;
  plain("cuBLASLt refused its own algorithm");
}

}  // namespace stoke::cuda
