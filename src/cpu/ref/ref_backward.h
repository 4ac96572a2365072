// The training ops of the reference CPU kernel set: forward variants that keep what
// backward needs, and the backward ops (contracts in backend/ops.h, checks in
// cpu/ref/op_checks_backward.h).
#pragma once

#include "backend/ops.h"

namespace stoke::cpu::ref {

void linear_backward(const TensorView& da, const TensorView& dw, const TensorView& db, const TensorView& dy,
                     const TensorView& a, const TensorView& w);
void residual_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                              const TensorView& x, const TensorView& residual, const TensorView& gamma,
                              const TensorView& beta, float eps);
void layernorm_backward(const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta, const TensorView& dy,
                        const TensorView& x, const TensorView& residual, const TensorView& mean,
                        const TensorView& rstd, const TensorView& gamma);
void embed_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                           const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
                           const TensorView& word, const TensorView& pos, const TensorView& type,
                           const TensorView& gamma, const TensorView& beta, float eps);
void embed_layernorm_backward(const TensorView& dword, const TensorView& dpos, const TensorView& dtype,
                              const TensorView& dgamma, const TensorView& dbeta, const TensorView& dy,
                              const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
                              const TensorView& word, const TensorView& pos, const TensorView& type,
                              const TensorView& mean, const TensorView& rstd, const TensorView& gamma);
void bias_gelu_train(const TensorView& x, const TensorView& pre, const TensorView& bias);
void bias_gelu_backward(const TensorView& dx, const TensorView& dbias, const TensorView& dy, const TensorView& pre);
void tanh_backward(const TensorView& dx, const TensorView& dy, const TensorView& y);
void attention_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                     const TensorView& cu_seqlens, int heads, int max_seqlen, const Ops::AttentionDropout& dropout);
void attention_backward(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv, const TensorView& out,
                        const TensorView& lse, const TensorView& cu_seqlens, int heads, int max_seqlen,
                        const Ops::AttentionDropout& dropout);
void gather_rows_backward(const TensorView& dh, const TensorView& dout, const TensorView& rows);
void pool_backward(const TensorView& dh, const TensorView& dout, const TensorView& h, const TensorView& cu_seqlens,
                   PoolingMode mode);
void add(const TensorView& y, const TensorView& x);

}  // namespace stoke::cpu::ref
