// CPU kernels: synchronous functions on host memory with the semantics of the
// op table (backend/ops.h). Two complete sets exist: reference (plain loops,
// the oracle, src/cpu/ref) and fast (oneDNN GEMM, vectorised and threaded
// kernels, src/cpu/fast). The CPU backend picks one set once, when it is made.
#pragma once

#include "backend/ops.h"

namespace stoke::cpu {

struct Kernels {
  const char* name;
  void (*linear)(const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias,
                 Activation act);
  void (*embed_layernorm)(const TensorView& out, const TensorView& ids, const TensorView& positions,
                          const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                          const TensorView& type, const TensorView& gamma, const TensorView& beta, float eps,
                          const TensorView& out_low);
  void (*residual_layernorm)(const TensorView& out, const TensorView& x, const TensorView& residual,
                             const TensorView& gamma, const TensorView& beta, float eps, const TensorView& out_low);
  void (*bias_gelu)(const TensorView& x, const TensorView& bias);
  void (*attention)(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                    int max_seqlen);
  void (*pool)(const TensorView& out, const TensorView& h, const TensorView& cu_seqlens, PoolingMode mode);
  void (*l2_normalize)(const TensorView& x);
  void (*gather_rows)(const TensorView& out, const TensorView& h, const TensorView& rows);
  void (*slice_columns)(const TensorView& out, const TensorView& in);
  void (*convert)(const TensorView& out, const TensorView& in);
  // --- training: forward variants that keep what backward needs, and backward ops (backend/ops.h)
  void (*linear_backward)(const TensorView& da, const TensorView& dw, const TensorView& db, const TensorView& dy,
                          const TensorView& a, const TensorView& w);
  void (*residual_layernorm_train)(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                                   const TensorView& x, const TensorView& residual, const TensorView& gamma,
                                   const TensorView& beta, float eps);
  void (*layernorm_backward)(const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta,
                             const TensorView& dy, const TensorView& x, const TensorView& residual,
                             const TensorView& mean, const TensorView& rstd, const TensorView& gamma);
  void (*embed_layernorm_train)(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                                const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
                                const TensorView& word, const TensorView& pos, const TensorView& type,
                                const TensorView& gamma, const TensorView& beta, float eps);
  void (*embed_layernorm_backward)(const TensorView& dword, const TensorView& dpos, const TensorView& dtype,
                                   const TensorView& dgamma, const TensorView& dbeta, const TensorView& dy,
                                   const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
                                   const TensorView& word, const TensorView& pos, const TensorView& type,
                                   const TensorView& mean, const TensorView& rstd, const TensorView& gamma);
  void (*bias_gelu_train)(const TensorView& x, const TensorView& pre, const TensorView& bias);
  void (*bias_gelu_backward)(const TensorView& dx, const TensorView& dbias, const TensorView& dy,
                             const TensorView& pre);
  void (*tanh_backward)(const TensorView& dx, const TensorView& dy, const TensorView& y);
  void (*attention_train)(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                          const TensorView& cu_seqlens, int heads, int max_seqlen,
                          const Ops::AttentionDropout& dropout);
  void (*attention_backward)(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv,
                             const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens, int heads,
                             int max_seqlen, const Ops::AttentionDropout& dropout);
  void (*gather_rows_backward)(const TensorView& dh, const TensorView& dout, const TensorView& rows);
  void (*pool_backward)(const TensorView& dh, const TensorView& dout, const TensorView& h,
                        const TensorView& cu_seqlens, PoolingMode mode);
  void (*add)(const TensorView& y, const TensorView& x);
  // --- end of training ops

  // --- training: dropout, loss, optimizer
  void (*dropout)(const TensorView& out, const TensorView& x, float p, uint64_t seed, uint32_t step,
                  uint32_t tensor_id);
  void (*dropout_backward)(const TensorView& dx, const TensorView& dy, float p, uint64_t seed, uint32_t step,
                           uint32_t tensor_id);
  void (*cross_entropy)(const TensorView& dlogits, const TensorView& metrics, const TensorView& logits,
                        const TensorView& labels, float label_smoothing, float scale);
  void (*mse_loss)(const TensorView& dpred, const TensorView& metrics, const TensorView& pred,
                   const TensorView& target, float scale);
  void (*sum_squares)(const TensorView& out, const TensorView& x);
  void (*clip_scale)(const TensorView& scale, const TensorView& sumsq, float max_norm);
  void (*adamw)(const TensorView& p, const TensorView& g, const TensorView& m, const TensorView& v,
                const TensorView& decay_ranges, const TensorView& grad_scale, const Ops::AdamWStep& hp);
};

const Kernels& reference_kernels();
const Kernels& fast_kernels();

// What the fast GEMM runs on this CPU, detected once at run time:
// "bf16 (AMX)", "bf16 (AVX512-BF16)" or "f32 only".
const char* cpu_bf16_support();
bool cpu_has_native_bf16();

}  // namespace stoke::cpu
