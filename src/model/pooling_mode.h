// The pooling a sentence-transformers Pooling module names, as the encoder's
// pooling op takes it: the same five modes in the vocabularies of two layers
// (io reads the module's file, the backend's ops compute it).
#pragma once

#include "backend/ops.h"
#include "io/sentence_transformers.h"

namespace stoke {

PoolingMode pooling_mode(Pooling pooling);

}  // namespace stoke
