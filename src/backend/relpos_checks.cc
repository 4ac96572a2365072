#include "backend/relpos_checks.h"

#include "backend/check_helpers.h"

namespace stoke {

using namespace checks;

namespace {

// `name` (rel or drel) must be [2*max_seqlen - 1, heads] f32.
void check_relpos_table(const char* op, const char* name, const TensorView& t, int heads, int max_seqlen) {
  need(op, name, t, 2);
  need_dtype(op, name, t, DType::f32);
  need_dim(op, name, t, 0, 2 * static_cast<int64_t>(max_seqlen) - 1);
  need_dim(op, name, t, 1, heads);
}

}  // namespace

AttentionShape check_attention_relpos(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens,
                                      int heads, int max_seqlen, const TensorView& rel, IndexData where) {
  const AttentionShape shape = check_attention(out, qkv, cu_seqlens, heads, max_seqlen, 0, where);
  check_relpos_table("attention_relpos", "rel", rel, heads, max_seqlen);
  return shape;
}

AttentionShape check_attention_relpos_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                                            const TensorView& cu_seqlens, int heads, int max_seqlen,
                                            const TensorView& rel, const Ops::AttentionDropout& dropout,
                                            IndexData where) {
  const AttentionShape shape = check_attention_train(out, lse, qkv, cu_seqlens, heads, max_seqlen, 0, dropout, where);
  check_relpos_table("attention_relpos_train", "rel", rel, heads, max_seqlen);
  return shape;
}

AttentionShape check_attention_relpos_backward(const TensorView& dqkv, const TensorView& drel, const TensorView& dout,
                                               const TensorView& qkv, const TensorView& out, const TensorView& lse,
                                               const TensorView& cu_seqlens, int heads, int max_seqlen,
                                               const TensorView& rel, const Ops::AttentionDropout& dropout,
                                               IndexData where) {
  const AttentionShape shape =
      check_attention_backward(dqkv, dout, qkv, out, lse, cu_seqlens, heads, max_seqlen, 0, dropout, where);
  check_relpos_table("attention_relpos_backward", "rel", rel, heads, max_seqlen);
  check_relpos_table("attention_relpos_backward", "drel", drel, heads, max_seqlen);
  return shape;
}

}  // namespace stoke
