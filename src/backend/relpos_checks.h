// Shape checks of the relative-position attention ops (op_list.h:
// attention_relpos*): the plain attention op's checks plus rel (and drel)
// [2*max_seqlen - 1, heads] f32. Every backend's kernels call these.
#pragma once

#include "backend/ops.h"
#include "backend/op_checks.h"
#include "backend/op_checks_backward.h"

namespace stoke {

AttentionShape check_attention_relpos(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens,
                                      int heads, int max_seqlen, const TensorView& rel,
                                      IndexData where = IndexData::host);
AttentionShape check_attention_relpos_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                                            const TensorView& cu_seqlens, int heads, int max_seqlen,
                                            const TensorView& rel, const Ops::AttentionDropout& dropout,
                                            IndexData where = IndexData::host);
AttentionShape check_attention_relpos_backward(const TensorView& dqkv, const TensorView& drel, const TensorView& dout,
                                               const TensorView& qkv, const TensorView& out, const TensorView& lse,
                                               const TensorView& cu_seqlens, int heads, int max_seqlen,
                                               const TensorView& rel, const Ops::AttentionDropout& dropout,
                                            IndexData where = IndexData::host);

}  // namespace stoke
