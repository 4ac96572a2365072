// One shard of multi-vector rows (ColBERT: a vector per token, a different
// number per row) as a ragged array: two .npy files that numpy reads without
// stoke (docs/output-format.md, "Multi-vector rows"):
//   <stem>.npy          f32 or f16 [total_vectors, dim]  every row's vectors, row after row
//   <stem>.offsets.npy  int64 [rows + 1]                 row r is vectors[offsets[r] : offsets[r + 1]]
// so `np.split(vectors, offsets[1:-1])` is the list of per-row arrays.
//
// As CsrShardWriter (io/csr_shard.h): the vectors are streamed to a temporary
// file, only the offsets are held (8 bytes a row), and commit() fsyncs and
// renames both files; the caller fsyncs the folder once per commit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/npy_stream.h"

namespace stoke {

struct RaggedShardFiles {
  std::string vectors, offsets;
};
RaggedShardFiles ragged_shard_files(const std::string& stem);  // "colbert-00003" -> colbert-00003.npy, colbert-00003.offsets.npy
std::string colbert_shard_stem(uint64_t shard);                 // "colbert-00003"

class RaggedShardWriter {
 public:
  // dtype: f32 or f16; dim >= 1.
  RaggedShardWriter(const std::filesystem::path& dir, const std::string& stem, DType dtype, int64_t dim);
  RaggedShardWriter(const RaggedShardWriter&) = delete;
  RaggedShardWriter& operator=(const RaggedShardWriter&) = delete;

  // One row of vectors.size() / dim vectors (zero is a valid row); refused
  // with Error(invalid_argument) when not a whole number of vectors or not finite.
  void add_row(std::span<const float> vectors);
  uint64_t rows() const { return offsets_.size() - 1; }
  uint64_t total_vectors() const { return static_cast<uint64_t>(offsets_.back()); }
  void commit();
  std::vector<std::filesystem::path> paths() const;

 private:
  std::filesystem::path dir_;
  RaggedShardFiles names_;
  DType dtype_;
  int64_t dim_;
  NpyStreamWriter vectors_;
  std::vector<int64_t> offsets_{0};
  std::vector<std::byte> scratch_;
};

// A ragged shard read back and checked: dtypes and shapes, offsets[0] = 0,
// non-decreasing, ending at the vector count, every value finite (dim 0: the
// file's width is taken as it is). Throws Error(format) naming the file.
struct RaggedRows {
  int64_t dim = 0;
  std::vector<float> vectors;    // (total, dim), f16 widened
  std::vector<int64_t> offsets;  // rows + 1
  uint64_t rows() const { return offsets.empty() ? 0 : offsets.size() - 1; }
};
RaggedRows read_ragged_shard(const std::filesystem::path& dir, const std::string& stem, int64_t dim = 0);

}  // namespace stoke
