// What `stoke tune` reads back from its trials' output folders: the
// embeddings, whatever --output-dtype wrote them as, and how closely a lower
// precision's vectors agree with f32's (also an int8 embed's own quality
// sample: jobs/int8_quality.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace stoke {

// Every row of the folder's embeddings-NNNNN.npy shards, in order, as f32:
// f32 shards as they are, f16 shards (--output-dtype f16) widened exactly.
// *dims is the row width. Throws Error(format) naming the shard for any other
// element type, a shape that is not 2-D, or a file shorter than its header says.
std::vector<float> read_output_embeddings(const std::filesystem::path& dir, int64_t* dims);

// Cosine between row r of `reference` and row r of `candidate`, over the rows
// both hold: the mean and the worst of (1 - cosine).
struct CosineAgreement {
  size_t rows = 0;
  double mean_gap = 0;   // mean of 1 - cosine
  double worst = 1;      // the smallest cosine
  // The mean cosine after removing the reference's mean vector from both
  // sides: raw cosine hides losses on anisotropic embeddings (every vector
  // shares a large common direction), centered cosine does not.
  double centered_mean = 1;
  double centered_worst = 1;  // the smallest centered cosine
};
CosineAgreement cosine_agreement(const std::vector<float>& reference, const std::vector<float>& candidate,
                                 int64_t dims);

// What tune says of a precision's vectors against f32's, in the measure and
// the words of int8's own quality report (jobs/int8_quality.h: centered
// cosine, worst raw cosine): "vs f32 over 66 texts: centered cosine mean
// 0.9994, min 0.9987 (raw cosine min 0.99998)"; "vs f32: no rows to compare
// (...)" when `q` has none.
std::string quality_vs_f32(const CosineAgreement& q);

}  // namespace stoke
