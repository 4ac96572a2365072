// MPNet's relative-position bias gradient on CUDA (kernels_relpos_drel.cu),
// for the backward launcher of kernels_attention_relpos_train.cu: device
// types of the exact kernels in its signature, so only .cu files include it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels_attention_train.cuh"
#include "cuda/kernels.h"

namespace stoke::cuda {

// drel[2 * max_seqlen - 1, heads] f32 WRITTEN (0 where no pair of tokens is
// that far apart): sum over sequences and queries i of dS_ij at j - i = r -
// (max_seqlen - 1), dS recomputed in f32 from qkv, dout, out and lse as
// a's kernels do. Tiled through `scratch` (relpos_drel_tiles.h) when one
// head's partials fit it, else a walk over the tokens per (r, head).
// Deterministic either way (fixed order, no atomics). A packed batch (B >= 1,
// T > 0), sequences no longer than max_seqlen.
void launch_relpos_drel(cudaStream_t s, const Scratch& scratch, const attention_train::Backward& a,
                        const attention_train::RelposScores& sc, float* drel, int64_t T);

}  // namespace stoke::cuda
