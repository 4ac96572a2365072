// The start-of-job check that every rank of a data-parallel run was started
// alike: each rank hashes every field of its settings (flags, data file
// digests), the hashes are gathered, and a field where any rank differs from
// rank 0 stops every rank with the same one-line error naming the field and
// the rank. Without it, ranks given different data or flags would all-reduce
// gradients of different problems into one silently wrong model.
#pragma once

#include <nlohmann/json.hpp>

#include "dist/communicator.h"

namespace stoke::dist {

// settings: a flat JSON object (field -> value). Throws Error(refused) on
// every rank when they differ (after Communicator::fail_together()).
void check_same_settings(Communicator& comm, const nlohmann::json& settings);

}  // namespace stoke::dist
