// kernels_splade_pool.cu: SPLADE's pooling of MLM logits (op_list.h: splade_pool).
#pragma once

#include <cuda_runtime.h>

#include "backend/ops.h"

namespace stoke::cuda {

// One thread per (vocabulary column, sequence); the max takes one log1p per
// output (log1p and relu are non-decreasing), the sum one per logit, in double.
void launch_splade_pool(cudaStream_t s, const TensorView& out, const TensorView& logits, const TensorView& cu_seqlens,
                        const Ops::SpladePool& p);

}  // namespace stoke::cuda
