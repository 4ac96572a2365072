// What the manifest (embed) and run.json (train) record about --model: what
// the user said, the folder actually loaded, and for a Hugging Face hub id the
// revision asked for and the snapshot's commit sha — so a run can be traced to
// the exact weights even after the cache's refs/main moved on.
#pragma once

#include <nlohmann/json.hpp>

#include "jobs/common_options.h"

namespace stoke {

// {"given", "path", "hub": {"repo_id", "revision", "commit", "cache"} or null}.
nlohmann::ordered_json model_source_json(const CommonOptions& options);

}  // namespace stoke
