// The shape, dtype and index checks of the ColBERT ops (backend/op_list.h):
// attention_keys (attention with a per-sequence key count: PyLate's
// unattended query expansion) and maxsim (late-interaction scores), shared by
// every backend. Each throws Error(invalid_argument) naming the op, the
// tensor, what it got and what was expected.
#pragma once

#include <cstdint>

#include "backend/op_checks.h"

namespace stoke {

// attention's checks, then key_lens[B] i32; its values (where host data):
// 1 <= key_lens[b] <= len_b for a non-empty sequence, 0 for an empty one,
// and with a window every query of b sees a key (len_b - 1 - window < key_lens[b]).
AttentionShape check_attention_keys(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens,
                                    const TensorView& key_lens, int heads, int max_seqlen, int window,
                                    IndexData where = IndexData::host);

struct MaxSimShape {
  int64_t Tq = 0, Td = 0, D = 0, N = 0;  // query vectors, document vectors, width, documents
};
// scores[N] f32; q[Tq, D], docs[Td, D] f32; offsets[N + 1] i32 from 0,
// non-decreasing, ending at Td (values read where host data).
MaxSimShape check_maxsim(const TensorView& scores, const TensorView& q, const TensorView& docs,
                         const TensorView& offsets, IndexData where = IndexData::host);

}  // namespace stoke
