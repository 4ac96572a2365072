// splade_pool on the GPU: the grid's x covers the vocabulary (consecutive
// threads read consecutive logits of a row: coalesced), its y the sequences;
// each thread walks its sequence's rows of the block. As the fast CPU kernel
// (src/cpu/fast/fast_splade_pool.cc): the max is log1p(relu(max x)), exact
// because log1pf is monotone; the sum adds log1p(relu(x)) in double.
#include "cuda/kernels.h"

#include "cuda/cuda_internal.h"
#include "cuda/kernels_common.cuh"

namespace stoke::cuda {

namespace {

__device__ float splade_activate(float x, int log1p_count) {
  float w = log1pf(fmaxf(x, 0.0f));
  return log1p_count == 2 ? log1pf(w) : w;
}

__global__ void splade_pool_kernel(float* out, const float* logits, const int32_t* cu, int64_t R, int64_t V,
                                   int64_t first_row, bool sum, int log1p_count, bool accumulate) {
  const int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t b = blockIdx.y;
  if (v >= V) return;
  const int64_t first = max(static_cast<int64_t>(cu[b]), first_row);
  const int64_t end = min(static_cast<int64_t>(cu[b + 1]), first_row + R);
  float* o = out + b * V + v;
  if (!sum) {
    float m = 0.0f;  // relu: nothing below 0 counts
    for (int64_t t = first; t < end; ++t) m = fmaxf(m, logits[(t - first_row) * V + v]);
    const float w = splade_activate(m, log1p_count);
    *o = accumulate ? fmaxf(*o, w) : w;
  } else {
    double s = 0.0;
    for (int64_t t = first; t < end; ++t) s += static_cast<double>(splade_activate(logits[(t - first_row) * V + v], log1p_count));
    *o = static_cast<float>((accumulate ? static_cast<double>(*o) : 0.0) + s);
  }
}

}  // namespace

void launch_splade_pool(cudaStream_t s, const TensorView& out, const TensorView& logits, const TensorView& cu_seqlens,
                        const Ops::SpladePool& p) {
  const int64_t B = out.dim(0), V = out.dim(1), R = logits.dim(0);
  if (B == 0 || V == 0) return;
  const dim3 grid(static_cast<unsigned>((V + 255) / 256), static_cast<unsigned>(B));
  splade_pool_kernel<<<grid, 256, 0, s>>>(out.as<float>(), logits.as<const float>(), cu_seqlens.as<const int32_t>(), R,
                                          V, p.first_row, p.sum, p.log1p_count, p.acc == Accumulate::yes);
  check_launch("splade_pool_kernel");
}

}  // namespace stoke::cuda
