// One shard of sparse rows (bge-m3's lexical weights, SPLADE vectors) in CSR
// form: three .npy files that numpy and scipy read without stoke
// (docs/output-format.md, "Sparse rows"):
//   <stem>.indices.npy  int32 [nnz]       vocabulary ids, strictly ascending within a row
//   <stem>.values.npy   f32 or f16 [nnz]  their weights
//   <stem>.indptr.npy   int64 [rows + 1]  row r holds entries indptr[r] .. indptr[r + 1] - 1
// so that
//   scipy.sparse.csr_matrix((values, indices, indptr), shape=(rows, vocab_size))
// is the shard's matrix (indices and indptr are the dtypes scipy keeps as they
// are; a row with no entry is two equal indptr values).
//
// The writer streams indices and values to temporary files as rows arrive and
// holds only indptr in memory (8 bytes a row); commit() makes the three files
// appear under their names (each fsync'd and renamed; the caller fsyncs the
// folder once for the whole commit, as pipeline/shard_writer.cc does).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/npy_stream.h"

namespace stoke {

// The three file names of a CSR shard stem, in the order above.
struct CsrShardFiles {
  std::string indices, values, indptr;
};
CsrShardFiles csr_shard_files(const std::string& stem);  // "sparse-00003" -> sparse-00003.indices.npy, ...
std::string sparse_shard_stem(uint64_t shard);            // "sparse-00003"

class CsrShardWriter {
 public:
  // values_dtype: f32 or f16. columns: the vocabulary size (every id must be below it).
  CsrShardWriter(const std::filesystem::path& dir, const std::string& stem, DType values_dtype, int64_t columns);
  CsrShardWriter(const CsrShardWriter&) = delete;
  CsrShardWriter& operator=(const CsrShardWriter&) = delete;

  // One row: ids strictly ascending in [0, columns), one finite value each.
  // Throws Error(invalid_argument) otherwise, before anything of the row is written.
  void add_row(std::span<const int32_t> ids, std::span<const float> values);
  uint64_t rows() const { return indptr_.size() - 1; }
  uint64_t nnz() const { return static_cast<uint64_t>(indptr_.back()); }
  // Writes indptr, fsyncs and renames the three files (no folder fsync).
  void commit();
  // The files' paths (where they are after commit).
  std::vector<std::filesystem::path> paths() const;

 private:
  std::filesystem::path dir_;
  CsrShardFiles names_;
  DType values_dtype_;
  int64_t columns_;
  NpyStreamWriter indices_, values_;
  std::vector<int64_t> indptr_{0};
  std::vector<std::byte> scratch_;
};

// A CSR shard read back and checked (stoke verify, tests): every file's dtype
// and shape, indptr[0] = 0, indptr non-decreasing and ending at nnz, ids
// strictly ascending within each row and inside [0, columns) (columns 0: not
// checked), values finite. f16 values are widened. Throws Error(format)
// naming the file and what is wrong; memory is the files' size.
struct CsrRows {
  std::vector<int32_t> indices;
  std::vector<float> values;
  std::vector<int64_t> indptr;
  uint64_t rows() const { return indptr.empty() ? 0 : indptr.size() - 1; }
};
CsrRows read_csr_shard(const std::filesystem::path& dir, const std::string& stem, int64_t columns = 0);

}  // namespace stoke
