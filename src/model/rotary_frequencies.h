// The frequencies of a rotary position embedding (the rotary op's inv_freq),
// formed on the host once per model as transformers forms them, so every
// backend rotates by the same f32 numbers.
#pragma once

#include <cstdint>
#include <vector>

namespace stoke {

// HF's default RoPE (compute_default_rope_parameters): for i < rotary_dim / 2,
// inv_freq[i] = 1 / theta^(2i / rotary_dim), in f32 arithmetic as torch
// computes it (the exponent an f32 quotient, the power in f32). rotary_dim
// even and >= 2, theta > 0 (else Error(invalid_argument)).
std::vector<float> default_rope_inv_freq(int64_t rotary_dim, double theta);

}  // namespace stoke
