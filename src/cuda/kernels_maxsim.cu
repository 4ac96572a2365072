// maxsim: one block per document, a warp per query vector (lanes over the
// width, the dot product summed across the warp in f32), each warp's best
// score per query vector added into a double, the block's sum in double,
// rounded once. A document without vectors scores 0.
#include <cfloat>

#include "cuda/kernels.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_common.cuh"

namespace stoke::cuda {

namespace {

constexpr int kThreads = 128;

__global__ void maxsim_kernel(float* scores, const float* q, const float* docs, const int32_t* offsets, int64_t Tq,
                              int64_t D) {
  __shared__ double scratch[32];
  const int64_t n = blockIdx.x;
  const int64_t first = offsets[n], len = offsets[n + 1] - first;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  double total = 0.0;  // this warp's query vectors (lane 0 holds the sum)
  if (len > 0)
    for (int64_t i = warp; i < Tq; i += warps) {
      float best = -FLT_MAX;
      for (int64_t j = 0; j < len; ++j) {
        float s = 0.0f;
        for (int64_t c = lane; c < D; c += 32) s += q[i * D + c] * docs[(first + j) * D + c];
        best = fmaxf(best, warp_sum(s));
      }
      total += static_cast<double>(best);
    }
  const double sum = block_sum(lane == 0 ? total : 0.0, scratch);
  if (threadIdx.x == 0) scores[n] = static_cast<float>(sum);
}

}  // namespace

void launch_maxsim(cudaStream_t s, const TensorView& scores, const TensorView& q, const TensorView& docs,
                   const TensorView& offsets) {
  const int64_t N = scores.dim(0);
  if (N == 0) return;
  if (N > INT32_MAX) throw Error(Errc::unsupported, "cuda maxsim: at most 2^31 documents per call");
  maxsim_kernel<<<static_cast<unsigned>(N), kThreads, 0, s>>>(scores.as<float>(), q.as<const float>(),
                                                              docs.as<const float>(), offsets.as<const int32_t>(),
                                                              q.dim(0), q.dim(1));
  check_launch("maxsim_kernel");
}

}  // namespace stoke::cuda
