// Shape, dtype and index checks of the op table (backend/op_list.h), shared by the
// reference and the fast CPU kernels so both sets accept exactly the same
// calls. Every check throws Error(invalid_argument) naming the op, the tensor,
// what it got and what was expected. Index tensors are read (ids, positions,
// cu_seqlens, rows): an out-of-range index would otherwise be a wild read.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "backend/ops.h"

namespace stoke {

// Where index tensors live. On a GPU (device) their values cannot be read
// here: the checks then cover shapes and dtypes only, and the caller has
// validated the values on the host before copying them (check_packed_batch).
enum class IndexData { host, device };

struct LinearShape {
  int64_t M, N, K;
};
// acc = Accumulate::yes: out must be f32 and act none (op_list.h: linear).
LinearShape check_linear(const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias,
                         Activation act, Accumulate acc);
LinearShape check_linear_int8(const TensorView& out, const TensorView& a, const TensorView& wq,
                              const TensorView& wq_meta, const TensorView& bias);

struct RowsShape {
  int64_t T, H;  // tokens (rows) and hidden size (columns)
};
RowsShape check_embed_layernorm(const TensorView& out, const TensorView& ids, const TensorView& positions,
                                const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                                const TensorView& type, const TensorView& gamma, const TensorView& beta, float eps,
                                IndexData where = IndexData::host);
// residual may be empty (LayerNorm of x alone).
RowsShape check_residual_layernorm(const TensorView& out, const TensorView& x, const TensorView& residual,
                                   const TensorView& gamma, const TensorView& beta, float eps);
RowsShape check_bias_gelu(const TensorView& x, const TensorView& bias);
// A LayerNorm's second output (may be empty): out's shape in an activation
// dtype, overlapping neither out nor any of the op's inputs.
void check_layernorm_copy(const char* op, const TensorView& out, const TensorView& out_low,
                          std::initializer_list<const TensorView*> inputs);

struct AttentionShape {
  int64_t T, B, heads, d;  // tokens, sequences, heads, head dim
};
// window: the sliding window of the attention ops (0 = global), >= 0.
AttentionShape check_attention(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                               int max_seqlen, int window, IndexData where = IndexData::host);

struct PoolShape {
  int64_t T, B, H;
};
PoolShape check_pool(const TensorView& out, const TensorView& h, const TensorView& cu_seqlens,
                     IndexData where = IndexData::host);
RowsShape check_l2_normalize(const TensorView& x);
RowsShape check_gather_rows(const TensorView& out, const TensorView& h, const TensorView& rows,
                            IndexData where = IndexData::host);  // {B, H}
RowsShape check_slice_columns(const TensorView& out, const TensorView& in);                       // {B, D}
int64_t check_convert(const TensorView& out, const TensorView& in);                               // numel

}  // namespace stoke
