// `stoke embed`: sentence vectors for every input record, in input order,
// written as numpy-readable files with a manifest (DESIGN "Output folders").
// Shards, resume and the overlapped pipeline come with the pipeline issue;
// this job writes one shard.
#pragma once

#include <optional>
#include <string>

#include "jobs/common_options.h"

namespace stoke {

struct EmbedOptions {
  CommonOptions common;
  std::string output;                 // --output DIR
  std::string pooling;                // --pooling ("" = from the model's files, else mean)
  std::optional<bool> normalize;      // --normalize / --no-normalize
  int64_t dimensions = 0;             // --dimensions D (0 = all)
  std::string prompt;                 // --prompt TEXT
  std::string prompt_name;            // --prompt-name NAME
  std::string output_dtype = "f32";   // --output-dtype f32|f16
  int64_t max_batch_size = 256;       // --max-batch-size
  bool overwrite = false;             // --overwrite
};

struct EmbedSummary {
  uint64_t texts = 0, tokens = 0, truncated = 0, replaced_utf8 = 0, batches = 0;
  int64_t dims = 0, max_length = 0;
  std::string pooling, precision, device;
  bool normalize = false;
  double seconds = 0;
  uint64_t host_syncs = 0;
};

EmbedSummary run_embed(const EmbedOptions& options);

}  // namespace stoke
