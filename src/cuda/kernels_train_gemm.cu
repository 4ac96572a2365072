// The general GEMM's fallback and the bias gradient's column sums (see
// kernels.h). Deterministic: every GEMM output is one thread's
// ordered sum; the column sums are kernels_column_reduce.cuh's fixed chunks.
#include "core/error.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_column_reduce.cuh"
#include "cuda/kernels_common.cuh"
#include "cuda/kernels.h"

namespace stoke::cuda {

namespace {

constexpr int kTile = 16;

// c[m,n] = sum_k op(a)[m,k] op(b)[k,n] (+ c[m,n]).
__global__ void plain_gemm_general_kernel(void* c, Elem c_e, const void* a, Elem a_e, bool trans_a, const void* b,
                                          Elem b_e, bool trans_b, int64_t M, int64_t N, int64_t K, bool accumulate) {
  const int64_t m = blockIdx.y * int64_t{kTile} + threadIdx.y, n = blockIdx.x * int64_t{kTile} + threadIdx.x;
  if (m >= M || n >= N) return;
  float acc = 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    const float x = load(a, a_e, trans_a ? k * M + m : m * K + k);
    const float y = load(b, b_e, trans_b ? n * K + k : k * N + n);
    acc += x * y;
  }
  if (accumulate) acc += load(c, c_e, m * N + n);
  store(c, c_e, m * N + n, acc);
}

}  // namespace

void launch_plain_gemm_general(cudaStream_t s, const TensorView& c, const TensorView& a, bool trans_a,
                               const TensorView& b, bool trans_b, bool accumulate) {
  const int64_t M = c.dim(0), N = c.dim(1), K = trans_a ? a.dim(0) : a.dim(1);
  if (M == 0 || N == 0) return;
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>((N + kTile - 1) / kTile), static_cast<unsigned>((M + kTile - 1) / kTile));
  if (grid.y > 65535) throw Error(Errc::unsupported, "cuda gemm fallback: at most 1,048,560 rows");
  plain_gemm_general_kernel<<<grid, block, 0, s>>>(c.data, elem_of(c.dtype), a.data, elem_of(a.dtype), trans_a,
                                                   b.data, elem_of(b.dtype), trans_b, M, N, K, accumulate);
  check_launch("plain_gemm_general_kernel");
}

void launch_column_sums(cudaStream_t s, const Scratch& scratch, const TensorView& db, const TensorView& dy) {
  const int64_t M = dy.dim(0), N = dy.dim(1);
  column_reduce::launch<1>(s, scratch, {{db.as<float>()}}, column_reduce::ColumnOf{dy.data, elem_of(dy.dtype), N}, M,
                           N, "column sums (linear_backward db)");
}

}  // namespace stoke::cuda
