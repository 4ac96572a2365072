// MPNet's relative-position attention for training (any dtype, any head
// dim), as src/cpu/ref/ref_attention.cc
// defines it: the score of query i and key j carries the per-head bias
// rel[(j - i) + max_seqlen - 1, h]; the forward writes lse and drops
// probabilities out with the CPU's Philox element index
// (kernels_attention_train.cuh); the backward writes dqkv and drel.
//
// The forward, dQ and dK/dV are the kernels of plain attention with the
// bias in the score: the flash kernels (kernels_attention_flash_train.cu)
// for bf16/f16 with head dim <= 128, else the exact ones
// (kernels_attention_train.cuh). drel, on both paths, is a
// block per (distance, head): its threads walk the packed query rows in a
// fixed stride, recompute dS_ij for the key at that distance, and the block
// sums them in a fixed tree. No atomics: the results do not depend on
// scheduling (deterministic run to run), at the price of recomputing the
// scores once per pass (O(max_seqlen * T * d) per head: correctness first).
#include "cuda/kernels_attention_flash_train.h"
#include "cuda/kernels_attention_train.cuh"
#include "cuda/kernels_train.h"

namespace stoke::cuda {

namespace {

using namespace attention_train;

// drel[r, h] = sum over every sequence and query i of dS_ij with j = i + r - (max_seqlen - 1);
// written (0 where no pair is that far apart). Block (r, h); T packed tokens.
__global__ void relpos_drel_kernel(Backward a, RelposScores sc, float* drel, int64_t T) {
  __shared__ float scratch[32];
  const int r = blockIdx.x, h = blockIdx.y;
  const int delta = r - (sc.max_seqlen - 1);
  const int d = a.d;
  const Cols c = cols_of(a.heads, d, h);
  const int64_t D = int64_t{a.heads} * d;
  const float bias_r = sc.rel[int64_t{r} * a.heads + h];
  float acc = 0.0f;
  for (int64_t t = threadIdx.x; t < T; t += blockDim.x) {
    if (t >= a.cu[a.B]) break;  // rows past the last sequence (none with a packed batch)
    const int b = sequence_of(a.cu, a.B, t);
    const int first = a.cu[b], len = a.cu[b + 1] - first;
    const int i = static_cast<int>(t - first), j = i + delta;
    if (j < 0 || j >= len) continue;
    const int64_t tj = first + j;
    float s = 0.0f, dp = 0.0f, Di = 0.0f;
    for (int k = 0; k < d; ++k) {
      const float g = load(a.dout, a.dout_e, t * D + c.q + k);
      s += load(a.qkv, a.e, t * c.stride + c.q + k) * load(a.qkv, a.e, tj * c.stride + c.k + k);
      dp += g * load(a.qkv, a.e, tj * c.stride + c.v + k);
      Di += g * load(a.out, a.out_e, t * D + c.q + k);
    }
    const float p = expf(s * a.scale + bias_r - a.lse[t * a.heads + h]);
    acc += p * (dp * mask_factor(a.dr, t, h, a.heads, j) - Di);
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) drel[int64_t{r} * a.heads + h] = acc;
}

}  // namespace

void launch_attention_relpos_train(cudaStream_t s, const TensorView& out, const TensorView& lse,
                                   const TensorView& qkv, const TensorView& cu_seqlens, int heads, int max_seqlen,
                                   const TensorView& rel, const Ops::AttentionDropout& dropout) {
  if (cu_seqlens.dim(0) <= 1 || qkv.dim(0) == 0 || max_seqlen == 0) return;
  if (flash_train_takes(qkv, out, heads)) {
    launch_flash_attention_train(s, out, lse, qkv, cu_seqlens, heads, 0, rel.as<const float>(), max_seqlen, dropout);
    return;
  }
  launch_forward(s, "attention_relpos_train", out, lse, qkv, cu_seqlens, heads, max_seqlen,
                 RelposScores{rel.as<const float>(), heads, max_seqlen}, dropout);
}

void launch_attention_relpos_backward(cudaStream_t s, const TensorView& dqkv, const TensorView& drel,
                                      const TensorView& dout, const TensorView& qkv, const TensorView& out,
                                      const TensorView& lse, const TensorView& cu_seqlens, int heads, int max_seqlen,
                                      const TensorView& rel, const Ops::AttentionDropout& dropout) {
  const int64_t T = qkv.dim(0);
  if (cu_seqlens.dim(0) <= 1 || T == 0 || max_seqlen == 0) {  // no pair of tokens: nothing flows back
    if (dqkv.bytes()) check_cuda(cudaMemsetAsync(dqkv.data, 0, dqkv.bytes(), s), "cudaMemsetAsync");
    if (drel.bytes()) check_cuda(cudaMemsetAsync(drel.data, 0, drel.bytes(), s), "cudaMemsetAsync");
    return;
  }
  const RelposScores sc{rel.as<const float>(), heads, max_seqlen};
  const bool flash = flash_train_takes(qkv, out, heads, {&dout, &dqkv});
  if (flash && 2 * int64_t{max_seqlen} - 1 > INT32_MAX)
    throw Error(Errc::unsupported, "cuda attention_relpos_backward: max_seqlen up to 2^30");
  const Backward a = flash ? backward_of(dqkv, dout, qkv, out, lse, cu_seqlens, heads, dropout)
                           : backward_args("attention_relpos_backward", dqkv, dout, qkv, out, lse, cu_seqlens, heads,
                                           max_seqlen, dropout);
  if (flash)
    launch_flash_attention_backward(s, dqkv, dout, qkv, out, lse, cu_seqlens, heads, 0, sc.rel, max_seqlen, dropout);
  else
    launch_backward(s, a, T, max_seqlen, sc);
  relpos_drel_kernel<<<dim3(static_cast<unsigned>(2 * max_seqlen - 1), static_cast<unsigned>(heads)), kThreads, 0, s>>>(
      a, sc, drel.as<float>(), T);
  check_launch("relpos_drel_kernel");
}

}  // namespace stoke::cuda
