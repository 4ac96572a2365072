// --precision int8: the layers' GEMM weights quantized once, at load, per
// output channel (the contract of linear_int8: backend/op_list.h).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/encoder_params.h"

namespace stoke {

// w[N,K] f32 quantized symmetrically per row n: scale[n] = max_k |w[n,k]| / 127
// (a zero row: scale 0, codes 0), q = round-to-nearest-even(w / scale) in
// [-127, 127]. meta = [scales (N) | exact row sums of q (N)], f32.
struct QuantizedWeight {
  std::vector<int8_t> q;    // [N, K]
  std::vector<float> meta;  // [2, N]
};
QuantizedWeight quantize_per_channel(const float* w, int64_t N, int64_t K);

// Replaces qkv_w, attn_out_w, ffn_in_w and ffn_out_w of every layer (f32, in
// host-readable memory) by their int8 codes and fills the matching *_meta
// views. The embedding projection and the heads stay f32 (a projection of
// E -> H once per token, the heads once per sequence). Throws
// Error(unsupported) on a backend whose memory is not host memory.
void quantize_layer_weights(LoadedEncoder& encoder, Backend& backend);

}  // namespace stoke
