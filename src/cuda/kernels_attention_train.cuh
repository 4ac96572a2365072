// What the exact attention training kernels share (kernels_attention_train.cu,
// kernels_attention_relpos_train.cu): the dropout key and its mask factor
// (the CPU's Philox element index, so both backends drop the very same
// probabilities), the sequence of a packed token, a head's qkv columns.
#pragma once

#include <cstdint>

#include "backend/ops.h"
#include "core/philox.h"

namespace stoke::cuda::attention_train {

struct Dropout {
  float p, scale;
  uint64_t seed;
  uint32_t step, tensor_id;
  uint64_t row_offset;
  const uint32_t* device_step;  // set: the step is read here when the kernel runs (graph replays)
};

inline Dropout dropout_of(const Ops::AttentionDropout& d) {
  // the dropout op's f32 factor
  return {d.p,          d.p < 1.0f ? 1.0f / (1.0f - d.p) : 0.0f, d.seed, d.step.value, d.tensor_id,
          d.row_offset, d.step.device.as<const uint32_t>()};
}

// The index layout of Ops::AttentionDropout::row_index (a host function):
// ((row_offset + t) * heads + h) << kKeyBits, plus the key j.
__device__ __forceinline__ float mask_factor(const Dropout& dr, int64_t t, int h, int heads, int j) {
  if (dr.p == 0.0f) return 1.0f;
  const uint64_t row = (dr.row_offset + static_cast<uint64_t>(t)) * static_cast<uint64_t>(heads) + static_cast<uint64_t>(h);
  const uint64_t index = (row << Ops::AttentionDropout::kKeyBits) + static_cast<uint64_t>(j);
  const uint32_t step = dr.device_step ? *dr.device_step : dr.step;
  return philox::element_uniform(dr.seed, step, dr.tensor_id, index) >= dr.p ? dr.scale : 0.0f;
}

// The sequence holding packed token t: the largest b with cu[b] <= t.
__device__ __forceinline__ int sequence_of(const int32_t* cu, int B, int64_t t) {
  int lo = 0, hi = B - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (cu[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

struct Cols {
  int64_t stride, q, k, v;  // qkv row width; this head's q, k, v columns
};
__device__ __forceinline__ Cols cols_of(int heads, int d, int h) {
  const int64_t q = int64_t{h} * d;
  return {int64_t{3} * heads * d, q, int64_t{heads} * d + q, int64_t{2} * heads * d + q};
}

}  // namespace stoke::cuda::attention_train
