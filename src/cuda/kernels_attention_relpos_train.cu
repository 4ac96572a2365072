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
// (kernels_attention_train.cuh). drel, on both paths, is
// kernels_relpos_drel.cu's: dS recomputed per 64 x 64 tile pair and summed
// along its diagonals, deterministically (no atomics), through the backend's
// reduction workspace.
#include "cuda/kernels_attention_flash_train.h"
#include "cuda/kernels_attention_train.cuh"
#include "cuda/kernels_relpos_drel.h"
#include "cuda/kernels.h"

namespace stoke::cuda {

using namespace attention_train;  // this file: the exact kernels' launchers and types

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

void launch_attention_relpos_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dqkv,
                                      const TensorView& drel, const TensorView& dout, const TensorView& qkv,
                                      const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens,
                                      int heads, int max_seqlen, const TensorView& rel,
                                      const Ops::AttentionDropout& dropout) {
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
    launch_flash_attention_backward(s, dqkv, dout, qkv, out, lse, cu_seqlens, heads, 0, sc.rel, max_seqlen, dropout,
                                    scratch);  // done with the workspace before drel takes it (stream order)
  else
    launch_backward(s, a, T, max_seqlen, sc);
  launch_relpos_drel(s, scratch, a, sc, drel.as<float>(), T);
}

}  // namespace stoke::cuda
