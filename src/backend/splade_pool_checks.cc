#include "backend/splade_pool_checks.h"

#include <fmt/format.h>

#include "backend/check_helpers.h"

namespace stoke {

using namespace checks;

SpladePoolShape check_splade_pool(const TensorView& out, const TensorView& logits, const TensorView& cu_seqlens,
                                  const Ops::SpladePool& p, IndexData where) {
  const char* op = "splade_pool";
  need(op, "logits", logits, 2);
  need(op, "out", out, 2);
  need(op, "cu_seqlens", cu_seqlens, 1);
  need_dtype(op, "logits", logits, DType::f32);
  need_dtype(op, "out", out, DType::f32);
  need_dtype(op, "cu_seqlens", cu_seqlens, DType::i32);
  if (cu_seqlens.dim(0) < 1) fail(op, "cu_seqlens is empty, expected B + 1 >= 1 offsets");
  const int64_t R = logits.dim(0), V = logits.dim(1), B = cu_seqlens.dim(0) - 1;
  need_dim(op, "out", out, 0, B);
  need_dim(op, "out", out, 1, V);
  need_no_overlap(op, "out", out, "logits", logits);
  if (p.first_row < 0) fail(op, fmt::format("first_row = {}, expected >= 0", p.first_row));
  if (p.log1p_count != 1 && p.log1p_count != 2)
    fail(op, fmt::format("log1p_count = {}, expected 1 (relu) or 2 (log1p_relu)", p.log1p_count));
  if (where == IndexData::host) {
    const int32_t* c = cu_seqlens.as<const int32_t>();
    if (c[0] != 0) fail(op, fmt::format("cu_seqlens[0] = {}, expected 0", c[0]));
    for (int64_t b = 0; b < B; ++b)
      if (c[b + 1] < c[b]) fail(op, fmt::format("cu_seqlens decreases at {} ({} after {})", b + 1, c[b + 1], c[b]));
  }
  return {R, V, B};
}

}  // namespace stoke
