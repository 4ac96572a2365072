// What each layer family changes in the tensors a model folder holds, beside
// the shapes every family shares (io/encoder_layout.cc): the shape of a role
// where the family's differs, and the roles its layers lack. One table here,
// one function per family, because io/ sits below the families' units in
// model/ (which place these tensors: model/post_ln_family.h,
// model/prenorm_family.h, model/decoder_family.h). A variant of a family
// changes nothing here; a new family adds its function and its row.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/hf_config.h"

namespace stoke {

// A dimension's size and the config field(s) it comes from ("3 * hidden_size").
using TensorDim = std::pair<int64_t, std::string>;

// The family's shape of role r; empty: the shared rule's.
std::vector<TensorDim> family_tensor_dims(const HfConfig& c, TensorRole r);

// Whether the family's models have no role r in layer `layer` (-1: a
// non-layer role), though the architecture names it.
bool family_lacks_tensor(const HfConfig& c, TensorRole r, int64_t layer);

}  // namespace stoke
