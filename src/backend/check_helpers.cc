#include "backend/check_helpers.h"

#include <fmt/format.h>

#include "core/error.h"

namespace stoke::checks {

void fail(const char* op, const std::string& what) {
  throw Error(Errc::invalid_argument, fmt::format("{}: {}", op, what));
}

std::string describe(const TensorView& t) { return fmt::format("{} {}", dtype_name(t.dtype), t.shape_string()); }

bool is_act(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

namespace {

void need_dense(const char* op, const char* name, const TensorView& t) {
  for (int i = 0; i < t.rank; ++i)
    if (t.dim(i) < 0) fail(op, fmt::format("{} has a negative dimension: {}", name, t.shape_string()));
  if (t.data == nullptr && t.numel() != 0) fail(op, fmt::format("{} {} has no data", name, t.shape_string()));
}

}  // namespace

void need(const char* op, const char* name, const TensorView& t, int rank) {
  if (t.rank != rank) fail(op, fmt::format("{} is {}, expected rank {}", name, describe(t), rank));
  need_dense(op, name, t);
}

void need_any_rank(const char* op, const char* name, const TensorView& t) {
  if (t.rank < 1 || t.rank > 4) fail(op, fmt::format("{} is {}, expected rank 1 to 4", name, describe(t)));
  need_dense(op, name, t);
}

void need_act(const char* op, const char* name, const TensorView& t) {
  if (!is_act(t.dtype)) fail(op, fmt::format("{} is {}, expected F32, BF16 or F16", name, describe(t)));
}

void need_dtype(const char* op, const char* name, const TensorView& t, DType want) {
  if (t.dtype != want) fail(op, fmt::format("{} is {}, expected {}", name, describe(t), dtype_name(want)));
}

void need_dim(const char* op, const char* name, const TensorView& t, int i, int64_t want) {
  if (t.dim(i) != want) fail(op, fmt::format("{} is {}: dimension {} must be {}", name, t.shape_string(), i, want));
}

void need_indices(const char* op, const char* name, const TensorView& idx, int64_t count, int64_t limit,
                  IndexData where) {
  need(op, name, idx, 1);
  need_dtype(op, name, idx, DType::i32);
  need_dim(op, name, idx, 0, count);
  if (where == IndexData::device) return;
  const int32_t* p = idx.as<const int32_t>();
  for (int64_t i = 0; i < count; ++i)
    if (p[i] < 0 || p[i] >= limit) fail(op, fmt::format("{}[{}] = {} is out of range [0, {})", name, i, p[i], limit));
}

int64_t need_cu_seqlens(const char* op, const TensorView& cu, int64_t T, IndexData where) {
  need(op, "cu_seqlens", cu, 1);
  need_dtype(op, "cu_seqlens", cu, DType::i32);
  if (cu.dim(0) < 1) fail(op, "cu_seqlens is empty, expected [batch + 1] offsets starting at 0");
  const int64_t B = cu.dim(0) - 1;
  if (where == IndexData::device) return B;
  const int32_t* c = cu.as<const int32_t>();
  if (c[0] != 0) fail(op, fmt::format("cu_seqlens[0] = {}, expected 0", c[0]));
  for (int64_t b = 0; b < B; ++b)
    if (c[b + 1] < c[b]) fail(op, fmt::format("cu_seqlens decreases at {}: {} then {}", b, c[b], c[b + 1]));
  if (c[B] != T) fail(op, fmt::format("cu_seqlens ends at {}, expected the token count {}", c[B], T));
  return B;
}

bool overlap(const TensorView& x, const TensorView& y) {
  if (x.data == nullptr || y.data == nullptr) return false;
  const char* a = static_cast<const char*>(x.data);
  const char* b = static_cast<const char*>(y.data);
  return a < b + y.bytes() && b < a + x.bytes();
}

void need_no_overlap(const char* op, const char* out_name, const TensorView& out, const char* in_name,
                     const TensorView& in) {
  if (overlap(out, in)) fail(op, fmt::format("{} overlaps {} in memory (not allowed for this op)", out_name, in_name));
}

}  // namespace stoke::checks
