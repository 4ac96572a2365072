// Each layer family's part of loading an encoder's parameters (load_encoder),
// beside the placement every family shares (the fields of EncoderParams by
// role, q/k/v and GLU halves stacked): what the family refuses to load, and
// the fixed tensors (computed, not stored: zeros, rotary frequencies) its
// sequence reads. Each family's answer is in its unit (model/post_ln_family.h,
// model/prenorm_family.h, model/decoder_family.h); this is the one table that
// picks it, so the loader never asks which family it loads.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "model/encoder_params.h"

namespace stoke {

// Places host floats as an f32 device tensor of `shape` (the loader's placer).
using PlaceFloats = std::function<TensorView(const std::vector<float>& values, const std::vector<int64_t>& shape)>;

// Throws Error(unsupported) for options the family's sequence cannot run (int8).
void check_family_load(const HfConfig& config, const EncoderLoadOptions& options);

// Throws Error(unsupported) when the family does not train this config
// (decoders: inference only, refuse_decoder_training; ModernBERT: dropout in its layers).
void check_family_training(const HfConfig& config);

// The family's fixed tensors into p, after its parameters are placed.
void place_family_fixed(const HfConfig& config, const PlaceFloats& place, EncoderParams& p);

}  // namespace stoke
