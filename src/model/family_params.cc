#include "model/family_params.h"

#include "model/decoder_family.h"
#include "model/prenorm_family.h"
#include "model/trainable_encoder.h"

namespace stoke {

void check_family_load(const HfConfig& c, const EncoderLoadOptions& o) {
  switch (c.arch->family) {
    case LayerFamily::post_ln_encoder: return;  // every option (int8: model/post_ln_family.h's layer_linear)
    case LayerFamily::prenorm_encoder: return prenorm_check_load(c, o);
    case LayerFamily::decoder: return decoder_check_load(c, o);
  }
}

void check_family_training(const HfConfig& c) {
  switch (c.arch->family) {
    case LayerFamily::post_ln_encoder: return;
    case LayerFamily::prenorm_encoder: return prenorm_check_training(c);
    case LayerFamily::decoder: refuse_decoder_training(*c.arch);
  }
}

void place_family_fixed(const HfConfig& c, const PlaceFloats& place, EncoderParams& p) {
  switch (c.arch->family) {
    case LayerFamily::post_ln_encoder: return;  // rotary variants' tables: rotary_tables, shared with the trainer
    case LayerFamily::prenorm_encoder: return prenorm_place_fixed(c, place, p);
    case LayerFamily::decoder: return;  // its rotary frequencies are the runner's (EncoderRunner)
  }
}

}  // namespace stoke
