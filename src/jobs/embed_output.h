// The embed output folder around the shard writer (docs/output-format.md):
// starting fresh (refusing to write over output unless asked), resuming from a
// manifest (refusing anything that would mix vector spaces or change the
// batches, re-checking what was committed and clearing what was not), and the
// manifest's JSON.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pipeline/shard_writer.h"

namespace stoke {

// Manifest fields a resumed run must match exactly, as JSON pointers. The
// first ones fix the vector space (RELIABILITY 8), the rest the batches and
// shards (so resumed files are byte-identical).
const std::vector<std::string>& embed_identity_fields();

struct EmbedOutputStart {
  CommitPoint committed;           // empty for a fresh start
  bool resumed = false;            // a manifest was found and trusted
  bool already_complete = false;   // nothing left to do
  std::vector<std::string> notes;  // what resume redid or cleared, for the user
  // The resumed manifest's "quality" (an int8 run's measured agreement with
  // f32, jobs/int8_quality.h), kept as the first run measured it; null when
  // it has none or nothing was resumed.
  nlohmann::ordered_json quality;
};

// Prepares `dir`. `manifest` holds the identity fields of this run (see
// embed_identity_fields). Throws Error(refused) naming the differing field, or
// when output exists and neither resume nor overwrite was asked.
EmbedOutputStart prepare_embed_output(const std::filesystem::path& dir, bool resume, bool overwrite,
                                      const nlohmann::ordered_json& manifest);

nlohmann::ordered_json shards_to_json(const std::vector<ShardEntry>& shards);
std::vector<ShardEntry> shards_from_json(const nlohmann::ordered_json& shards);
// Sums over committed shards, plus skipped records.
nlohmann::ordered_json committed_counts(const CommitPoint& point);

}  // namespace stoke
