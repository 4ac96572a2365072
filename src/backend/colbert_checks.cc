#include "backend/colbert_checks.h"

#include <fmt/format.h>

#include "backend/check_helpers.h"

namespace stoke {

using namespace checks;  // NOLINT: the checks' own helpers

AttentionShape check_attention_keys(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens,
                                    const TensorView& key_lens, int heads, int max_seqlen, int window,
                                    IndexData where) {
  const char* op = "attention_keys";
  const AttentionShape shape = check_attention(out, qkv, cu_seqlens, heads, max_seqlen, window, where);
  need(op, "key_lens", key_lens, 1);
  need_dtype(op, "key_lens", key_lens, DType::i32);
  need_dim(op, "key_lens", key_lens, 0, shape.B);
  if (where == IndexData::device) return shape;
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  const int32_t* k = key_lens.as<const int32_t>();
  for (int64_t b = 0; b < shape.B; ++b) {
    const int64_t len = cu[b + 1] - cu[b];
    if (len == 0 ? k[b] != 0 : (k[b] < 1 || k[b] > len))
      fail(op, fmt::format("key_lens[{}] = {} for a sequence of {} tokens, expected {}", b, k[b], len,
                           len == 0 ? std::string("0") : fmt::format("1 .. {}", len)));
    if (window > 0 && len - 1 - window >= k[b])
      fail(op, fmt::format("sequence {}: with window {} its query {} sees none of its {} keys", b, window, len - 1,
                           k[b]));
  }
  return shape;
}

MaxSimShape check_maxsim(const TensorView& scores, const TensorView& q, const TensorView& docs,
                         const TensorView& offsets, IndexData where) {
  const char* op = "maxsim";
  need(op, "q", q, 2);
  need(op, "docs", docs, 2);
  need(op, "scores", scores, 1);
  need(op, "offsets", offsets, 1);
  need_dtype(op, "q", q, DType::f32);
  need_dtype(op, "docs", docs, DType::f32);
  need_dtype(op, "scores", scores, DType::f32);
  need_dtype(op, "offsets", offsets, DType::i32);
  MaxSimShape s{q.dim(0), docs.dim(0), q.dim(1), scores.dim(0)};
  need_dim(op, "docs", docs, 1, s.D);
  need_dim(op, "offsets", offsets, 0, s.N + 1);
  need_no_overlap(op, "scores", scores, "q", q);
  need_no_overlap(op, "scores", scores, "docs", docs);
  if (where == IndexData::device) return s;
  const int32_t* o = offsets.as<const int32_t>();
  if (o[0] != 0) fail(op, fmt::format("offsets[0] = {}, expected 0", o[0]));
  for (int64_t n = 0; n < s.N; ++n)
    if (o[n + 1] < o[n]) fail(op, fmt::format("offsets[{}] = {} < offsets[{}] = {}: expected ascending", n + 1, o[n + 1], n, o[n]));
  if (o[s.N] != s.Td) fail(op, fmt::format("offsets[{}] = {}, expected Td = {} (docs' rows)", s.N, o[s.N], s.Td));
  return s;
}

}  // namespace stoke
