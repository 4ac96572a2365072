// Output rows to shards with the commit protocol of docs/output-format.md:
// each shard is streamed to a temporary file, and at its commit the data is
// fsync'd and renamed, then the ids file the same way, then the errors of the
// records it covers are appended to errors.jsonl and fsync'd, then the folder
// is fsync'd — and only then is the manifest (the commit record) rewritten, by
// the caller's callback. A kill at any point leaves the previous manifest, which
// names only complete files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "io/atomic_file.h"

namespace stoke {

// A data file of a shard beside its embeddings and ids (the sparse and
// multi-vector outputs), as the manifest lists it.
struct ShardFile {
  std::string name, sha256;
  bool operator==(const ShardFile&) const = default;
};

// One committed shard, as the manifest lists it.
struct ShardEntry {
  std::vector<ShardFile> files;     // sparse / ColBERT files (empty for dense-only runs)
  uint64_t index = 0, rows = 0, first_row = 0, first_record = 0, last_record = 0;
  uint64_t records_after = 0;       // every record before this number is accounted for
  uint64_t errors_bytes_after = 0;  // length of errors.jsonl at this commit
  uint64_t skipped_after = 0;       // lines of errors.jsonl at this commit
  uint64_t tokens = 0, truncated = 0, replaced_utf8 = 0;  // over this shard's rows
  std::string embeddings_sha256, ids_sha256;
};

// What one row's record cost and lost, summed per shard for the manifest.
struct RowCounts {
  uint64_t tokens = 0;
  bool truncated = false;
  uint64_t replaced_utf8 = 0;
};
// What a shard holds besides its ids (docs/output-format.md): the dense
// rows, bge-m3's lexical weights as CSR (io/csr_shard.h) and its ColBERT
// vectors as a ragged array (io/ragged_shard.h). Default: dense only.
struct ShardOutputs {
  bool dense = true;
  int64_t sparse_columns = 0;  // > 0: sparse rows over a vocabulary of this size
  int64_t colbert_dim = 0;     // > 0: multi-vector rows of this width
  bool extras() const { return sparse_columns > 0 || colbert_dim > 0; }
};

// A row's outputs besides its dense values (those ShardOutputs asks for).
struct RowExtras {
  std::span<const int32_t> sparse_ids;  // strictly ascending vocabulary ids
  std::span<const float> sparse_values;
  std::span<const float> colbert;       // vectors x colbert_dim
};

std::string embeddings_file_name(uint64_t shard);  // embeddings-00003.npy
std::string ids_file_name(uint64_t shard);         // ids-00003.jsonl
inline constexpr const char* kErrorsFileName = "errors.jsonl";

// What the manifest commits.
struct CommitPoint {
  std::vector<ShardEntry> shards;
  uint64_t rows = 0, records = 0, errors_bytes = 0, skipped = 0;
  bool complete = false;
};

class ShardWriter {
 public:
  // Writes the manifest for a commit point; runs after the shard's files are durable.
  using OnCommit = std::function<void(const CommitPoint&)>;

  // `start`: what an earlier run committed (empty for a fresh output).
  ShardWriter(std::filesystem::path dir, DType dtype, int64_t dims, uint64_t shard_size, CommitPoint start,
              OnCommit on_commit, ShardOutputs outputs = {});
  ~ShardWriter();  // an open shard is abandoned (its temp files removed)
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // The next output row: its record number, id (JSON text; "" = the record
  // number) and `dims` floats. Commits the shard when it is full at a
  // record's last row: a chunked record's rows (record_ends false but for
  // its last) stay in one shard, which may pass the shard size by them, so
  // that a commit always accounts for whole records.
  // `extras`: the row's sparse / ColBERT outputs when the writer has them.
  void add_row(uint64_t record, std::string_view id_json, const float* values, const RowCounts& counts,
               bool record_ends = true, const RowExtras* extras = nullptr);
  // One line for errors.jsonl (without newline); written at the next commit.
  void add_error(std::string_view line);
  // Commits what is left and marks the output complete; `records` is the
  // number of records in the whole input.
  void finish(uint64_t records);
  const CommitPoint& committed() const { return committed_; }

 private:
  struct OpenShard;
  void commit(uint64_t records_after, bool complete);

  std::filesystem::path dir_;
  DType dtype_;
  int64_t dims_;
  ShardOutputs outputs_;
  uint64_t shard_size_;
  OnCommit on_commit_;
  CommitPoint committed_;
  std::unique_ptr<OpenShard> open_;
  std::string pending_errors_;
  uint64_t pending_skipped_ = 0;
  std::vector<std::byte> row_bytes_;
};

}  // namespace stoke
