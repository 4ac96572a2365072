// Attention for training, the exact path: the forward that also writes lse
// and applies dropout to the probabilities, and the backward, as
// src/cpu/ref/ref_attention.cc defines them (its header has the formulas),
// with a sliding window or none. The kernels (kernels_attention_train.cuh)
// are MPNet's too, with another score; dropout: the mask element of query row
// t (packed), head h, key j is Philox's uniform at flat index
// ((row_offset + t) * heads + h) * 2^32 + j (Ops::AttentionDropout,
// core/philox.h), so the CPU and the GPU drop the very same probabilities.
// bf16/f16 with head dim <= 128 take the flash kernels on the tensor cores
// (kernels_attention_flash_train.cu: O(tile) shared memory, any length); f32,
// larger head dims and other dtype mixes take the exact kernels here (O(len)
// shared memory per row: up to ~5,000 tokens in the backward).
#include "cuda/kernels_attention_flash_train.h"
#include "cuda/kernels_attention_train.cuh"
#include "cuda/kernels.h"

namespace stoke::cuda {

using namespace attention_train;

void launch_attention_train(cudaStream_t s, const TensorView& out, const TensorView& lse, const TensorView& qkv,
                            const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                            const Ops::AttentionDropout& dropout) {
  if (cu_seqlens.dim(0) <= 1 || qkv.dim(0) == 0 || max_seqlen == 0) return;
  if (flash_train_takes(qkv, out, heads)) {
    launch_flash_attention_train(s, out, lse, qkv, cu_seqlens, heads, window, nullptr, max_seqlen, dropout);
    return;
  }
  launch_forward(s, "attention_train", out, lse, qkv, cu_seqlens, heads, max_seqlen, WindowScores{window}, dropout);
}

void launch_attention_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dqkv, const TensorView& dout,
                               const TensorView& qkv, const TensorView& out, const TensorView& lse,
                               const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                               const Ops::AttentionDropout& dropout) {
  const int64_t T = qkv.dim(0);
  if (T == 0) return;
  if (cu_seqlens.dim(0) <= 1 || max_seqlen == 0) {  // no sequence holds a token: nothing flows back
    check_cuda(cudaMemsetAsync(dqkv.data, 0, dqkv.bytes(), s), "cudaMemsetAsync");
    return;
  }
  if (flash_train_takes(qkv, out, heads, {&dout, &dqkv})) {
    launch_flash_attention_backward(s, dqkv, dout, qkv, out, lse, cu_seqlens, heads, window, nullptr, max_seqlen,
                                    dropout, scratch);
    return;
  }
  const Backward a =
      backward_args("attention_backward", dqkv, dout, qkv, out, lse, cu_seqlens, heads, max_seqlen, dropout);
  launch_backward(s, a, T, max_seqlen, WindowScores{window});
}

}  // namespace stoke::cuda
