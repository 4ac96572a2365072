// Launchers of our own CUDA kernels, one section per op family and file,
// each family's forward, training form and backward side by side. Each one
// enqueues on `stream` and returns; shapes and dtypes were checked by the
// caller (cuda_ops.cc, through the shared op checks, backend/*_checks.h).
// Contracts: backend/op_list.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/embedding_loss_checks.h"
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

// kernels_layernorm.cu: the LayerNorm family (mean and rstd [T] f32).
void launch_embed_layernorm(cudaStream_t s, const TensorView& out, const TensorView& ids, const TensorView& positions,
                            const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                            const TensorView& type, const TensorView& gamma, const TensorView& beta, float eps,
                            const TensorView& out_low);
void launch_residual_layernorm(cudaStream_t s, const TensorView& out, const TensorView& x, const TensorView& residual,
                               const TensorView& gamma, const TensorView& beta, float eps, const TensorView& out_low);
void launch_residual_layernorm_train(cudaStream_t s, const TensorView& out, const TensorView& mean,
                                     const TensorView& rstd, const TensorView& x, const TensorView& residual,
                                     const TensorView& gamma, const TensorView& beta, float eps);
void launch_embed_layernorm_train(cudaStream_t s, const TensorView& out, const TensorView& mean,
                                  const TensorView& rstd, const TensorView& ids, const TensorView& positions,
                                  const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                                  const TensorView& type, const TensorView& gamma, const TensorView& beta, float eps);
void launch_layernorm_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dx, const TensorView& dgamma,
                               const TensorView& dbeta, const TensorView& dy, const TensorView& x,
                               const TensorView& residual, const TensorView& mean, const TensorView& rstd,
                               const TensorView& gamma, Accumulate dx_acc);
// kernels_embedding_backward.cu: embed_layernorm_backward, the scatter into
// the tables by sorted runs.
void launch_embed_layernorm_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dword,
                                     const TensorView& dpos,
                                     const TensorView& dtype, const TensorView& dgamma, const TensorView& dbeta,
                                     const TensorView& dy, const TensorView& ids, const TensorView& positions,
                                     const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                                     const TensorView& type, const TensorView& mean, const TensorView& rstd,
                                     const TensorView& gamma);

// kernels_elementwise.cu
// x[T,N] = act(x + bias[N]) in place (bias may be empty; act may be none).
void launch_bias_act(cudaStream_t s, const TensorView& x, const TensorView& bias, Activation act);
void launch_bias_gelu_train(cudaStream_t s, const TensorView& x, const TensorView& pre, const TensorView& bias);
void launch_bias_gelu_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dx, const TensorView& dbias,
                               const TensorView& dy, const TensorView& pre);
void launch_tanh_backward(cudaStream_t s, const TensorView& dx, const TensorView& dy, const TensorView& y);
void launch_relu_backward(cudaStream_t s, const TensorView& dx, const TensorView& dy, const TensorView& y);
void launch_add(cudaStream_t s, const TensorView& y, const TensorView& x);
void launch_convert(cudaStream_t s, const TensorView& out, const TensorView& in);
void launch_gather_rows(cudaStream_t s, const TensorView& out, const TensorView& h, const TensorView& rows);
void launch_gather_rows_backward(cudaStream_t s, const TensorView& dh, const TensorView& dout, const TensorView& rows);
void launch_slice_columns(cudaStream_t s, const TensorView& out, const TensorView& in);
void launch_l2_normalize(cudaStream_t s, const TensorView& x);

// kernels_pool.cu
void launch_pool(cudaStream_t s, const TensorView& out, const TensorView& h, const TensorView& cu_seqlens,
                 Pooling mode);
void launch_pool_backward(cudaStream_t s, const TensorView& dh, const TensorView& dout, const TensorView& h,
                          const TensorView& cu_seqlens, Pooling mode);

// kernels_dropout.cu (dropout_backward is dropout applied to dy).
// first: the flat mask index of x[0] (check_dropout's DropoutRange::first).
// A device step (Ops::DropoutStep::device) is read by the kernel when it runs.
void launch_dropout(cudaStream_t s, const TensorView& out, const TensorView& x, float p, uint64_t seed,
                    const Ops::DropoutStep& step, uint32_t tensor_id, uint64_t first);

// kernels_losses.cu
void launch_cross_entropy(cudaStream_t s, const TensorView& dlogits, const TensorView& metrics,
                          const TensorView& logits, const TensorView& labels, float label_smoothing, float scale);
void launch_mse_loss(cudaStream_t s, const TensorView& dpred, const TensorView& metrics, const TensorView& pred,
                     const TensorView& target, float scale);

// kernels_optimizer.cu
void launch_sum_squares(cudaStream_t s, const Scratch& scratch, const TensorView& out, const TensorView& x);
void launch_clip_scale(cudaStream_t s, const TensorView& scale, const TensorView& sumsq, float max_norm);
void launch_adamw(cudaStream_t s, const TensorView& p, const TensorView& g, const TensorView& m, const TensorView& v,
                  const TensorView& decay_ranges, const TensorView& grad_scale, const TensorView& scaler,
                  const Ops::AdamWStep& hp);

// kernels_loss_scale.cu
void launch_loss_scale_multiply(cudaStream_t s, const TensorView& x, const TensorView& scaler);
void launch_loss_scale_unscale(cudaStream_t s, const TensorView& g, const TensorView& scaler);
void launch_loss_scale_update(cudaStream_t s, const TensorView& scaler, float growth_factor, float backoff_factor,
                              int growth_interval);

// kernels_embedding_loss.cu: embedding_loss's kernels, in the order
// CudaOps::embedding_loss enqueues them around its GEMMs (cuda_ops.cc):
//
//   rows          row norms; mnrl kinds: the centre c, v_i = u_i - c, c . v_i
//   [GEMM]        sim[B, M] = v_A · v_C^T                       (mnrl kinds)
//   softmax       the anchors' statistics and losses; G over sim, its row
//                 and column sums                               (mnrl kinds)
//   [GEMMs]       dv_A = G · v_C, dv_C = G^T · v_A             (mnrl kinds, training)
//   pairs         s(a_b, p_b), the loss and dL/ds               (cosent, cosine_mse)
//   backward      d_emb += factor * the normalization's backward of each row's gradient
//   metrics       metrics += the anchors' sums, in a fixed order
//
// Every piece lives in the op's workspace (backend/embedding_loss_checks.h,
// EmbeddingLossLayout, which also says why the rows are centred). No
// atomics: each sum has a fixed shape and order, so the result is the same
// on every run. Shapes were checked by the caller (check_embedding_loss).
void launch_embedding_loss_rows(cudaStream_t s, const TensorView& emb, const TensorView& workspace,
                                const EmbeddingLossShape& shape, const Ops::EmbeddingLoss& loss);
void launch_embedding_loss_softmax(cudaStream_t s, const TensorView& workspace, const EmbeddingLossShape& shape,
                                   const Ops::EmbeddingLoss& loss, bool grad);
void launch_embedding_loss_pairs(cudaStream_t s, const TensorView& emb, const TensorView& scores,
                                 const TensorView& workspace, const EmbeddingLossShape& shape,
                                 const Ops::EmbeddingLoss& loss);
void launch_embedding_loss_backward(cudaStream_t s, const TensorView& d_emb, const TensorView& emb,
                                    const TensorView& workspace, const EmbeddingLossShape& shape,
                                    const Ops::EmbeddingLoss& loss);
void launch_embedding_loss_metrics(cudaStream_t s, const TensorView& metrics, const TensorView& workspace,
                                   const EmbeddingLossShape& shape, const Ops::EmbeddingLoss& loss);

// kernels_splade_pool.cu: SPLADE's pooling of MLM logits (op_list.h: splade_pool).
// One thread per (vocabulary column, sequence); the max takes one log1p per
// output (log1p and relu are non-decreasing), the sum one per logit, in double.
void launch_splade_pool(cudaStream_t s, const TensorView& out, const TensorView& logits, const TensorView& cu_seqlens,
                        const Ops::SpladePool& p);

// kernels_gemm_fallback.cu: out[M,N] (+)= a[M,K] · w[N,K]^T (+ bias[N]), a
// thread per output (for shapes cuBLASLt has no algorithm for); with
// `accumulate`, out's value is added last.
void launch_plain_gemm(cudaStream_t s, const TensorView& out, const TensorView& a, const TensorView& w,
                       const TensorView& bias, bool accumulate);
// kernels_train_gemm.cu: c[M,N] = op(a) · op(b) (+ c when accumulate), row
// major, f32 accumulation, a thread per output walking k in order (for the
// operand dtype mixes cuBLASLt does not take). op(x) = x^T when trans_x.
void launch_plain_gemm_general(cudaStream_t s, const TensorView& c, const TensorView& a, bool trans_a,
                               const TensorView& b, bool trans_b, bool accumulate);
// db[N] += column sums of dy[M,N] (f32), a thread per column, rows in order.
void launch_column_sums(cudaStream_t s, const Scratch& scratch, const TensorView& db, const TensorView& dy);

// kernels_attention.cu: variable-length attention over packed tokens (its
// inference, training and backward launchers; MPNet's relative-position
// forms are kernels_attention_relpos.cu's); the inference grid is a
// flattened (sequence, query block) work list found from cu_seqlens on the
// device (sequences longer than max_seqlen are the caller's error, checked
// on the host).
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
// kernels_attention_relpos.cu: attention with MPNet's relative-position bias
// rel[2*max_seqlen - 1, heads] (f32).
void launch_attention_relpos(cudaStream_t s, const TensorView& out, const TensorView& qkv,
                             const TensorView& cu_seqlens, int heads, int max_seqlen, const TensorView& rel);

// kernels_attention.cu: the attention forward with lse and dropout,
// and its backward (dqkv written in full): the flash kernels for bf16/f16
// with head dim <= 128 (kernels_attention_flash_train.h), else the exact ones.
void launch_attention_train(cudaStream_t s, const TensorView& out, const TensorView& lse, const TensorView& qkv,
                            const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                            const Ops::AttentionDropout& dropout);
void launch_attention_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dqkv, const TensorView& dout,
                               const TensorView& qkv, const TensorView& out, const TensorView& lse,
                               const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                               const Ops::AttentionDropout& dropout);

// kernels_attention_relpos.cu: MPNet's relative-position forms of the
// two above (no window; drel written in full, deterministically, its
// partial sums in `scratch`: relpos_drel_tiles.h).
void launch_attention_relpos_train(cudaStream_t s, const TensorView& out, const TensorView& lse,
                                   const TensorView& qkv, const TensorView& cu_seqlens, int heads, int max_seqlen,
                                   const TensorView& rel, const Ops::AttentionDropout& dropout);
void launch_attention_relpos_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dqkv,
                                      const TensorView& drel, const TensorView& dout, const TensorView& qkv,
                                      const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens,
                                      int heads, int max_seqlen, const TensorView& rel,
                                      const Ops::AttentionDropout& dropout);

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
