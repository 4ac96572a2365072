// Launchers of the training kernels (kernels_train.cu): each enqueues on
// `stream` and returns; shapes and dtypes were checked by the caller
// (cuda_ops.cc, through the shared op checks). Contracts: backend/op_list.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/ops.h"
#include "core/tensor.h"

namespace stoke::cuda {

// Device memory an op may use while it runs (CudaBackend::Impl's reduction
// workspace): ops run in stream order, so one buffer serves them all, and a
// captured graph bakes in the same buffer its replays use.
struct Scratch {
  void* data = nullptr;
  size_t bytes = 0;
};

void launch_tanh_backward(cudaStream_t s, const TensorView& dx, const TensorView& dy, const TensorView& y);
void launch_relu_backward(cudaStream_t s, const TensorView& dx, const TensorView& dy, const TensorView& y);
void launch_add(cudaStream_t s, const TensorView& y, const TensorView& x);
// first: the flat mask index of x[0] (check_dropout's DropoutRange::first).
// A device step (Ops::DropoutStep::device) is read by the kernel when it runs.
void launch_dropout(cudaStream_t s, const TensorView& out, const TensorView& x, float p, uint64_t seed,
                    const Ops::DropoutStep& step, uint32_t tensor_id, uint64_t first);
void launch_bias_gelu_train(cudaStream_t s, const TensorView& x, const TensorView& pre, const TensorView& bias);
void launch_bias_gelu_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dx, const TensorView& dbias,
                               const TensorView& dy, const TensorView& pre);
void launch_residual_layernorm_train(cudaStream_t s, const TensorView& out, const TensorView& mean,
                                     const TensorView& rstd, const TensorView& x, const TensorView& residual,
                                     const TensorView& gamma, const TensorView& beta, float eps);
void launch_layernorm_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dx, const TensorView& dgamma,
                               const TensorView& dbeta, const TensorView& dy, const TensorView& x,
                               const TensorView& residual, const TensorView& mean, const TensorView& rstd,
                               const TensorView& gamma, Accumulate dx_acc);
void launch_embed_layernorm_train(cudaStream_t s, const TensorView& out, const TensorView& mean,
                                  const TensorView& rstd, const TensorView& ids, const TensorView& positions,
                                  const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                                  const TensorView& type, const TensorView& gamma, const TensorView& beta, float eps);
void launch_embed_layernorm_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dword,
                                     const TensorView& dpos,
                                     const TensorView& dtype, const TensorView& dgamma, const TensorView& dbeta,
                                     const TensorView& dy, const TensorView& ids, const TensorView& positions,
                                     const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                                     const TensorView& type, const TensorView& mean, const TensorView& rstd,
                                     const TensorView& gamma);
void launch_sum_squares(cudaStream_t s, const Scratch& scratch, const TensorView& out, const TensorView& x);
void launch_clip_scale(cudaStream_t s, const TensorView& scale, const TensorView& sumsq, float max_norm);
void launch_adamw(cudaStream_t s, const TensorView& p, const TensorView& g, const TensorView& m, const TensorView& v,
                  const TensorView& decay_ranges, const TensorView& grad_scale, const TensorView& scaler,
                  const Ops::AdamWStep& hp);
void launch_loss_scale_multiply(cudaStream_t s, const TensorView& x, const TensorView& scaler);
void launch_loss_scale_unscale(cudaStream_t s, const TensorView& g, const TensorView& scaler);
void launch_loss_scale_update(cudaStream_t s, const TensorView& scaler, float growth_factor, float backoff_factor,
                              int growth_interval);
void launch_mse_loss(cudaStream_t s, const TensorView& dpred, const TensorView& metrics, const TensorView& pred,
                     const TensorView& target, float scale);

void launch_gather_rows_backward(cudaStream_t s, const TensorView& dh, const TensorView& dout, const TensorView& rows);
void launch_pool_backward(cudaStream_t s, const TensorView& dh, const TensorView& dout, const TensorView& h,
                          const TensorView& cu_seqlens, PoolingMode mode);
void launch_cross_entropy(cudaStream_t s, const TensorView& dlogits, const TensorView& metrics,
                          const TensorView& logits, const TensorView& labels, float label_smoothing, float scale);

// kernels_attention_train.cu: the attention forward with lse and dropout,
// and its backward (dqkv written in full): the flash kernels for bf16/f16
// with head dim <= 128 (kernels_attention_flash_train.h), else the exact ones.
void launch_attention_train(cudaStream_t s, const TensorView& out, const TensorView& lse, const TensorView& qkv,
                            const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                            const Ops::AttentionDropout& dropout);
void launch_attention_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dqkv, const TensorView& dout,
                               const TensorView& qkv, const TensorView& out, const TensorView& lse,
                               const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                               const Ops::AttentionDropout& dropout);

// kernels_attention_relpos_train.cu: MPNet's relative-position forms of the
// two above (no window; drel written in full, deterministically, its
// partial sums in `scratch`: kernels_relpos_drel.h).
void launch_attention_relpos_train(cudaStream_t s, const TensorView& out, const TensorView& lse,
                                   const TensorView& qkv, const TensorView& cu_seqlens, int heads, int max_seqlen,
                                   const TensorView& rel, const Ops::AttentionDropout& dropout);
void launch_attention_relpos_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dqkv,
                                      const TensorView& drel, const TensorView& dout, const TensorView& qkv,
                                      const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens,
                                      int heads, int max_seqlen, const TensorView& rel,
                                      const Ops::AttentionDropout& dropout);

// kernels_train_gemm.cu: c[M,N] = op(a) · op(b) (+ c when accumulate), row
// major, f32 accumulation, a thread per output walking k in order (for the
// operand dtype mixes cuBLASLt does not take). op(x) = x^T when trans_x.
void launch_plain_gemm_general(cudaStream_t s, const TensorView& c, const TensorView& a, bool trans_a,
                               const TensorView& b, bool trans_b, bool accumulate);
// db[N] += column sums of dy[M,N] (f32), a thread per column, rows in order.
void launch_column_sums(cudaStream_t s, const Scratch& scratch, const TensorView& db, const TensorView& dy);

}  // namespace stoke::cuda
