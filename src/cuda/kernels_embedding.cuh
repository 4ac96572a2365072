// The embedding row a training token reads (embed_layernorm_train and its
// backward: kernels_layernorm.cu, kernels_embedding_backward.cu).
#pragma once

#include <cstdint>

#include "cuda/kernels_common.cuh"

namespace stoke::cuda {

// The embedding row of token t: word[ids[t]] + pos[positions[t]] (+ type[type_ids[t] or 0]).
__device__ __forceinline__ float embedding_at(const int32_t* ids, const int32_t* positions, const int32_t* type_ids,
                                              const void* word, const void* pos, const void* type, Elem we, Elem pe,
                                              Elem te, int64_t t, int64_t H, int64_t c) {
  float v = load(word, we, int64_t{ids[t]} * H + c) + load(pos, pe, int64_t{positions[t]} * H + c);
  if (type) v += load(type, te, (type_ids ? int64_t{type_ids[t]} : 0) * H + c);
  return v;
}

// The same row element summed in double (exact for f32 tables, or nearly):
// the LayerNorm forwards' input (kernels_layernorm.cu says why).
__device__ __forceinline__ double embedding_at_wide(const int32_t* ids, const int32_t* positions,
                                                    const int32_t* type_ids, const void* word, const void* pos,
                                                    const void* type, Elem we, Elem pe, Elem te, int64_t t, int64_t H,
                                                    int64_t c) {
  double v = static_cast<double>(load(word, we, int64_t{ids[t]} * H + c)) +
             static_cast<double>(load(pos, pe, int64_t{positions[t]} * H + c));
  if (type) v += static_cast<double>(load(type, te, (type_ids ? int64_t{type_ids[t]} : 0) * H + c));
  return v;
}

}  // namespace stoke::cuda
