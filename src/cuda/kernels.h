// Launchers of our own CUDA kernels (the op table's non-GEMM ops). Each one
// enqueues on `stream` and returns; shapes and dtypes were checked by the
// caller (cuda_ops.cc, through the shared op checks).
#pragma once

#include <cuda_runtime.h>

#include "backend/ops.h"
#include "core/tensor.h"

namespace stoke::cuda {

// kernels_layernorm.cu
void launch_embed_layernorm(cudaStream_t s, const TensorView& out, const TensorView& ids, const TensorView& positions,
                            const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                            const TensorView& type, const TensorView& gamma, const TensorView& beta, float eps,
                            const TensorView& out_low);
void launch_residual_layernorm(cudaStream_t s, const TensorView& out, const TensorView& x, const TensorView& residual,
                               const TensorView& gamma, const TensorView& beta, float eps, const TensorView& out_low);

// kernels_elementwise.cu
// x[T,N] = act(x + bias[N]) in place (bias may be empty; act may be none).
void launch_bias_act(cudaStream_t s, const TensorView& x, const TensorView& bias, Activation act);
void launch_convert(cudaStream_t s, const TensorView& out, const TensorView& in);
void launch_gather_rows(cudaStream_t s, const TensorView& out, const TensorView& h, const TensorView& rows);
void launch_slice_columns(cudaStream_t s, const TensorView& out, const TensorView& in);
void launch_l2_normalize(cudaStream_t s, const TensorView& x);

// kernels_gemm_fallback.cu: out[M,N] (+)= a[M,K] · w[N,K]^T (+ bias[N]), a
// thread per output (for shapes cuBLASLt has no algorithm for); with
// `accumulate`, out's value is added last.
void launch_plain_gemm(cudaStream_t s, const TensorView& out, const TensorView& a, const TensorView& w,
                       const TensorView& bias, bool accumulate);

// kernels_pool.cu
void launch_pool(cudaStream_t s, const TensorView& out, const TensorView& h, const TensorView& cu_seqlens,
                 PoolingMode mode);

// kernels_attention.cu: variable-length attention over packed tokens; the
// grid is a flattened (sequence, query block) work list found from
// cu_seqlens on the device (sequences longer than max_seqlen are the
// caller's error, checked on the host).
void attention_setup();  // once per device: kernel attributes (shared memory)
// window: the sliding window (0 = global), as op_list.h states it.
void launch_attention(cudaStream_t s, const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens,
                      int heads, int max_seqlen, int window);
// attention_keys: key_lens[B] i32 on the device (empty: every token a key).
void launch_attention_keys(cudaStream_t s, const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens,
                           const TensorView& key_lens, int heads, int max_seqlen, int window);
// kernels_maxsim.cu: scores[N] = sum_i max_j q_i · d_j per document (op_list.h maxsim).
void launch_maxsim(cudaStream_t s, const TensorView& scores, const TensorView& q, const TensorView& docs,
                   const TensorView& offsets);
// attention with MPNet's relative-position bias rel[2*max_seqlen - 1, heads] (f32).
void launch_attention_relpos(cudaStream_t s, const TensorView& out, const TensorView& qkv,
                             const TensorView& cu_seqlens, int heads, int max_seqlen, const TensorView& rel);

// kernels_decoder.cu: the decoder ops (Qwen2, Qwen3), contracts in op_list.h.
void launch_residual_rmsnorm(cudaStream_t s, const TensorView& h, const TensorView& out, const TensorView& x,
                             const TensorView& gamma, float eps);
void launch_head_rmsnorm(cudaStream_t s, const TensorView& qkv, const TensorView& q_gamma, const TensorView& k_gamma,
                         int heads, int kv_heads, float eps);
void launch_attention_gqa(cudaStream_t s, const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens,
                          int heads, int kv_heads, bool causal);

// kernels_rotary.cu: rotary (backward = false) or rotary_backward in place,
// as op_list.h states them; cu_seqlens and inv_freq on the device.
void launch_rotary(cudaStream_t s, const TensorView& x, const TensorView& cu_seqlens, const TensorView& inv_freq,
                   const Ops::Rotary& rope, bool backward);

// kernels_glu.cu: glu and glu_backward as op_list.h states them.
void launch_glu(cudaStream_t s, const TensorView& out, const TensorView& x, const Ops::Glu& glu);
void launch_glu_backward(cudaStream_t s, const TensorView& dx, const TensorView& dout, const TensorView& x,
                         const Ops::Glu& glu);

}  // namespace stoke::cuda
