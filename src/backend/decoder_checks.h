// Shape, dtype and index checks of the decoder ops (backend/op_list.h,
// "decoder embedders" block: residual_rmsnorm, head_rmsnorm, attention_gqa),
// shared by the reference, fast and CUDA kernels. Same rules as op_checks.h.
#pragma once

#include "backend/op_checks.h"

namespace stoke {

RowsShape check_residual_rmsnorm(const TensorView& h, const TensorView& out, const TensorView& x,
                                 const TensorView& gamma, float eps);

// Grouped-query attention geometry: q heads, k/v heads, head dim.
struct GqaShape {
  int64_t T, B, heads, kv_heads, d;
};
GqaShape check_head_rmsnorm(const TensorView& qkv, const TensorView& q_gamma, const TensorView& k_gamma, int heads,
                            int kv_heads, float eps);
GqaShape check_attention_gqa(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                             int kv_heads, int max_seqlen, IndexData where = IndexData::host);

}  // namespace stoke
