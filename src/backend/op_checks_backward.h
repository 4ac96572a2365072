// Shape, dtype and index checks of the training ops (backend/ops.h, "training"
// block), shared by the reference and the fast CPU kernels so both sets
// accept exactly the same calls. Same rules as op_checks.h: every check throws
// Error(invalid_argument) naming the op, the tensor, what it got and what was
// expected; index tensors are read and range-checked.
#pragma once

#include "backend/op_checks.h"

namespace stoke {

// da_acc = Accumulate::yes: da must be f32 (op_list.h: linear_backward).
LinearShape check_linear_backward(const TensorView& da, const TensorView& dw, const TensorView& db,
                                  const TensorView& dy, const TensorView& a, const TensorView& w,
                                  Accumulate da_acc);
RowsShape check_residual_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                                         const TensorView& x, const TensorView& residual, const TensorView& gamma,
                                         const TensorView& beta, float eps);
// dx_acc = Accumulate::yes: dx must be f32 and apart from dy (op_list.h:
// layernorm_backward).
RowsShape check_layernorm_backward(const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta,
                                   const TensorView& dy, const TensorView& x, const TensorView& residual,
                                   const TensorView& mean, const TensorView& rstd, const TensorView& gamma,
                                   Accumulate dx_acc);
RowsShape check_embed_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                                      const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
                                      const TensorView& word, const TensorView& pos, const TensorView& type,
                                      const TensorView& gamma, const TensorView& beta, float eps,
                                      IndexData where = IndexData::host);
RowsShape check_embed_layernorm_backward(const TensorView& dword, const TensorView& dpos, const TensorView& dtype,
                                         const TensorView& dgamma, const TensorView& dbeta, const TensorView& dy,
                                         const TensorView& ids, const TensorView& positions,
                                         const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                                         const TensorView& type, const TensorView& mean, const TensorView& rstd,
                                         const TensorView& gamma, IndexData where = IndexData::host);
RowsShape check_bias_gelu_train(const TensorView& x, const TensorView& pre, const TensorView& bias);
RowsShape check_bias_gelu_backward(const TensorView& dx, const TensorView& dbias, const TensorView& dy,
                                   const TensorView& pre);
RowsShape check_tanh_backward(const TensorView& dx, const TensorView& dy, const TensorView& y);
RowsShape check_relu_backward(const TensorView& dx, const TensorView& dy, const TensorView& y);
// The attention checks also refuse a dropout probability outside [0, 1].
// IndexData::device (the CUDA backend): index values live on the device and
// are not read (the host validated them before copying), as in op_checks.h.
AttentionShape check_attention_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                                     const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                                     const Ops::AttentionDropout& dropout, IndexData where = IndexData::host);
AttentionShape check_attention_backward(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv,
                                        const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens,
                                        int heads, int max_seqlen, int window,
                                        const Ops::AttentionDropout& dropout, IndexData where = IndexData::host);
RowsShape check_gather_rows_backward(const TensorView& dh, const TensorView& dout, const TensorView& rows,
                                     IndexData where = IndexData::host);  // {B, H}
PoolShape check_pool_backward(const TensorView& dh, const TensorView& dout, const TensorView& h,
                              const TensorView& cu_seqlens, Pooling mode, IndexData where = IndexData::host);

// add: y and x activations of equal shape, apart or identical (y += y doubles).
int64_t check_add(const TensorView& y, const TensorView& x);

}  // namespace stoke
