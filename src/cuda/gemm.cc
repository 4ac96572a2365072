#include "cuda/gemm.h"

#include <string>

#include "core/error.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels.h"

namespace stoke::cuda {

namespace {

template <class T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& value) {
  check_cublas(cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof(value)), "cublasLtMatmulDescSetAttribute");
}

}  // namespace

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: throw Error(Errc::internal, "cuda gemm: no CUDA type for this dtype");
  }
}

int alignment_of(std::initializer_list<const void*> ptrs) {
  int a = 256;
  for (const void* p : ptrs) {
    if (!p) continue;
    const auto u = reinterpret_cast<uintptr_t>(p);
    while (a > 1 && u % static_cast<uintptr_t>(a) != 0) a /= 2;
  }
  return a;
}

Gemm::~Gemm() {
  for (auto& [key, p] : plans_) destroy(p);
}

void Gemm::destroy(Plan& p) {
  if (p.op) cublasLtMatmulDescDestroy(p.op);
  if (p.w) cublasLtMatrixLayoutDestroy(p.w);
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.out) cublasLtMatrixLayoutDestroy(p.out);
  p = Plan{};
}

bool Gemm::make_plan(Plan& p, const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias,
                     bool with_bias, int alignment) {
  const uint64_t M = static_cast<uint64_t>(a.dim(0)), K = static_cast<uint64_t>(a.dim(1)),
                 N = static_cast<uint64_t>(w.dim(0));
  // f32 stays exact f32 (no TF32): f32 is the reference precision.
  check_cublas(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  set_desc(p.op, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set_desc(p.op, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (with_bias) {
    set_desc(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set_desc(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, cuda_type(bias.dtype));
    // The heuristic judges the bias's alignment by its pointer.
    set_desc(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias.data));
  }
  // Column-major views: w^T-stored (K x N, ld K) transposed, a^T (K x M, ld K), out^T (N x M, ld N).
  check_cublas(cublasLtMatrixLayoutCreate(&p.w, cuda_type(w.dtype), K, N, static_cast<int64_t>(K)),
               "cublasLtMatrixLayoutCreate");
  check_cublas(cublasLtMatrixLayoutCreate(&p.a, cuda_type(a.dtype), K, M, static_cast<int64_t>(K)),
               "cublasLtMatrixLayoutCreate");
  check_cublas(cublasLtMatrixLayoutCreate(&p.out, cuda_type(out.dtype), N, M, static_cast<int64_t>(N)),
               "cublasLtMatrixLayoutCreate");
  cublasLtMatmulPreference_t pref = nullptr;
  check_cublas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const uint32_t align = static_cast<uint32_t>(alignment);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes_, sizeof(ws_bytes_));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.w, p.a, p.out, p.out, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    destroy(p);
    return false;
  }
  p.algo = result.algo;
  p.fused_bias = with_bias;
  return true;
}

Gemm::Plan& Gemm::plan(const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias) {
  const int alignment = alignment_of({out.data, a.data, w.data, bias.data});
  const Key key{a.dim(0), w.dim(0), a.dim(1), static_cast<int>(a.dtype), static_cast<int>(w.dtype),
                static_cast<int>(out.dtype), bias.empty() ? -1 : static_cast<int>(bias.dtype), alignment};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  if (plans_.size() >= 4096) {  // packed batches vary in M: keep the cache bounded
    for (auto& [k, p] : plans_) destroy(p);
    plans_.clear();
  }
  // cuBLASLt documents the bias epilogue for a bias of the output's dtype
  // (bf16 output, f32 bias: our bias kernel adds it).
  Plan p;
  const bool fuse = !bias.empty() && bias.dtype == out.dtype;
  if (!(fuse && make_plan(p, out, a, w, bias, true, alignment)) && !make_plan(p, out, a, w, bias, false, alignment))
    p.plain = true;
  return plans_.emplace(key, p).first->second;
}

bool Gemm::run(cudaStream_t stream, const TensorView& out, const TensorView& a, const TensorView& w,
               const TensorView& bias, bool accumulate) {
  if (a.dim(0) == 0 || w.dim(0) == 0) return true;
  if (a.dim(1) == 0) {
    // K = 0: the product is zero (cuBLASLt may refuse the shape); adding it changes nothing.
    if (!accumulate) check_cuda(cudaMemsetAsync(out.data, 0, out.bytes(), stream), "cudaMemsetAsync");
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  Plan& p = plan(out, a, w, bias);
  if (p.plain) {
    fallbacks_.count("linear", gemm_shape_name(a.dim(0), w.dim(0), a.dim(1), a.dtype, w.dtype, out.dtype),
                     "cuBLASLt found no algorithm");
    launch_plain_gemm(stream, out, a, w, bias, accumulate);
    return true;
  }
  if (p.fused_bias) set_desc(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias.data));
  // The plan does not depend on beta: one plan serves both forms.
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  cublasStatus_t status = cublasLtMatmul(lt_, p.op, &alpha, w.data, p.w, a.data, p.a, &beta, out.data, p.out,
                                         out.data, p.out, &p.algo, ws_, ws_bytes_, stream);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
    // The heuristic offered an algorithm the matmul then refused: this
    // shape takes the plain kernel from now on.
    destroy(p);
    p.plain = true;
    fallbacks_.count("linear", gemm_shape_name(a.dim(0), w.dim(0), a.dim(1), a.dtype, w.dtype, out.dtype),
                     "cuBLASLt refused its own algorithm");
    launch_plain_gemm(stream, out, a, w, bias, accumulate);
    return true;
  }
  check_cublas(status, "cublasLtMatmul");
  return p.fused_bias;
}

}  // namespace stoke::cuda
