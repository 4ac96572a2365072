// The small helpers every op check is made of (op_checks.cc,
// op_checks_backward.cc, train_checks.cc), written once. Each throws
// Error(invalid_argument) "<op>: <what was wrong, what was expected>".
// Internal to the checks: callers of the op table use op_checks.h.
#pragma once

#include <cstdint>
#include <string>

#include "backend/ops.h"
#include "backend/op_checks.h"

namespace stoke::checks {

[[noreturn]] void fail(const char* op, const std::string& what);

// "BF16 [3, 4]": a tensor's dtype and shape, for messages.
std::string describe(const TensorView& t);

// f32, bf16 or f16.
bool is_act(DType t);

// A dense tensor of exactly `rank` dimensions, none negative, whose data is
// null only when it holds nothing.
void need(const char* op, const char* name, const TensorView& t, int rank);
// The same for a tensor of any rank from 1 to 4 (flat buffers of the
// training ops: any shape).
void need_any_rank(const char* op, const char* name, const TensorView& t);
void need_act(const char* op, const char* name, const TensorView& t);
void need_dtype(const char* op, const char* name, const TensorView& t, DType want);
void need_dim(const char* op, const char* name, const TensorView& t, int i, int64_t want);

// idx[count] i32, every value in [0, limit) (values read on the host only).
void need_indices(const char* op, const char* name, const TensorView& idx, int64_t count, int64_t limit,
                  IndexData where = IndexData::host);
// cu_seqlens[B+1]: 0, non-decreasing, ending at T (values read on the host
// only). Returns B.
int64_t need_cu_seqlens(const char* op, const TensorView& cu, int64_t T, IndexData where = IndexData::host);

// Whether two views share any byte (an empty or null view overlaps nothing).
bool overlap(const TensorView& x, const TensorView& y);
void need_no_overlap(const char* op, const char* out_name, const TensorView& out, const char* in_name,
                     const TensorView& in);

}  // namespace stoke::checks
