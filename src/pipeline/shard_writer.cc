#include "pipeline/shard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "core/crash_point.h"
#include "core/error.h"
#include "core/half.h"
#include "core/sha256.h"
#include "io/csr_shard.h"
#include "io/npy.h"
#include "io/ragged_shard.h"

namespace stoke {

namespace fs = std::filesystem;

namespace {

// Room for any row count: the real header is written over it at commit time.
constexpr size_t kReservedHeader = 128;

std::string numbered(const char* prefix, uint64_t shard, const char* ext) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%05llu%s", prefix, static_cast<unsigned long long>(shard), ext);
  return buf;
}

void append_durably(const fs::path& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(Errc::io, path.string() + ": open for append failed: " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int saved = errno;
      ::close(fd);
      throw Error(Errc::io, path.string() + ": write failed: " + std::strerror(saved));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int saved = errno;
    ::close(fd);
    throw Error(Errc::io, path.string() + ": fsync failed: " + std::strerror(saved));
  }
  ::close(fd);
}

}  // namespace

std::string embeddings_file_name(uint64_t shard) { return numbered("embeddings", shard, ".npy"); }
std::string ids_file_name(uint64_t shard) { return numbered("ids", shard, ".jsonl"); }

struct ShardWriter::OpenShard {
  uint64_t index = 0, rows = 0, first_record = 0, last_record = 0;
  uint64_t tokens = 0, truncated = 0, replaced_utf8 = 0;
  std::optional<AtomicFileWriter> embeddings;  // without dense rows: none
  AtomicFileWriter ids;
  std::unique_ptr<CsrShardWriter> sparse;
  std::unique_ptr<RaggedShardWriter> colbert;
  OpenShard(const fs::path& dir, uint64_t i, const ShardOutputs& o, DType dtype) : index(i), ids(dir / ids_file_name(i)) {
    if (o.dense) embeddings.emplace(dir / embeddings_file_name(i));
    if (o.sparse_columns > 0) sparse = std::make_unique<CsrShardWriter>(dir, sparse_shard_stem(i), dtype, o.sparse_columns);
    if (o.colbert_dim > 0) colbert = std::make_unique<RaggedShardWriter>(dir, colbert_shard_stem(i), dtype, o.colbert_dim);
  }
};

ShardWriter::ShardWriter(fs::path dir, DType dtype, int64_t dims, uint64_t shard_size, CommitPoint start,
                         OnCommit on_commit, ShardOutputs outputs)
    : dir_(std::move(dir)),
      dtype_(dtype),
      dims_(dims),
      outputs_(outputs),
      shard_size_(shard_size),
      on_commit_(std::move(on_commit)),
      committed_(std::move(start)) {
  if (dtype_ != DType::f32 && dtype_ != DType::f16)
    throw Error(Errc::invalid_argument, "--output-dtype: expected f32 or f16");
  if (shard_size_ == 0) throw Error(Errc::invalid_argument, "--shard-size: expected a positive number");
  row_bytes_.resize(static_cast<size_t>(dims_) * dtype_size(dtype_));
}

ShardWriter::~ShardWriter() = default;

void ShardWriter::add_row(uint64_t record, std::string_view id_json, const float* values,
                          const RowCounts& counts, bool record_ends, const RowExtras* extras) {
  if (outputs_.extras() && !extras) throw Error(Errc::internal, "a row without the sparse / ColBERT outputs asked for");
  if (!open_) {
    open_ = std::make_unique<OpenShard>(dir_, committed_.shards.size(), outputs_, dtype_);
    open_->first_record = record;
    const std::string reserve(kReservedHeader, ' ');
    if (open_->embeddings) open_->embeddings->append(reserve);
  }
  // The extras first: a row they refuse (not ascending, not finite) leaves nothing half-written.
  if (open_->sparse) open_->sparse->add_row(extras->sparse_ids, extras->sparse_values);
  if (open_->colbert) open_->colbert->add_row(extras->colbert);
  if (dtype_ == DType::f32) {
    std::memcpy(row_bytes_.data(), values, row_bytes_.size());
  } else {
    for (int64_t c = 0; c < dims_; ++c) {
      const f16 h = to_f16(values[c]);
      std::memcpy(row_bytes_.data() + c * 2, &h.bits, 2);
    }
  }
  if (open_->embeddings) open_->embeddings->append(row_bytes_);
  if (id_json.empty()) {
    open_->ids.append(std::to_string(record));
  } else {
    open_->ids.append(id_json);
  }
  open_->ids.append("\n");
  open_->rows++;
  open_->last_record = record;
  open_->tokens += counts.tokens;
  open_->truncated += counts.truncated ? 1 : 0;
  open_->replaced_utf8 += counts.replaced_utf8;
  if (record_ends && open_->rows >= shard_size_) commit(record + 1, /*complete=*/false);
}

void ShardWriter::add_error(std::string_view line) {
  pending_errors_ += line;
  pending_errors_ += '\n';
  pending_skipped_++;
}

void ShardWriter::finish(uint64_t records) { commit(records, /*complete=*/true); }

void ShardWriter::commit(uint64_t records_after, bool complete) {
  CommitPoint next = committed_;
  if (open_) {
    OpenShard& s = *open_;
    const std::string header = npy_header(dtype_, static_cast<int64_t>(s.rows), dims_, kReservedHeader);
    if (header.size() != kReservedHeader) throw Error(Errc::internal, "npy header does not fit its reserved room");
    if (s.embeddings) s.embeddings->write_at(0, std::span(reinterpret_cast<const std::byte*>(header.data()), header.size()));
    ShardEntry e;
    e.index = s.index;
    e.rows = s.rows;
    e.first_row = committed_.rows;
    e.first_record = s.first_record;
    e.last_record = s.last_record;
    e.tokens = s.tokens;
    e.truncated = s.truncated;
    e.replaced_utf8 = s.replaced_utf8;
    // Data first: fsync + rename each file; checksums from the fsync'd bytes.
    crash_point("shard-written");
    if (s.embeddings) s.embeddings->commit();
    crash_point("shard-data-renamed");
    std::vector<fs::path> extras;
    if (s.sparse) {
      s.sparse->commit();
      for (const fs::path& p : s.sparse->paths()) extras.push_back(p);
    }
    if (s.colbert) {
      s.colbert->commit();
      for (const fs::path& p : s.colbert->paths()) extras.push_back(p);
    }
    if (!extras.empty()) crash_point("shard-extras-renamed");
    s.ids.commit();
    crash_point("shard-ids-renamed");
    if (s.embeddings) e.embeddings_sha256 = sha256_file(dir_ / embeddings_file_name(s.index));
    e.ids_sha256 = sha256_file(dir_ / ids_file_name(s.index));
    for (const fs::path& p : extras) e.files.push_back({p.filename().string(), sha256_file(p)});
    next.rows += s.rows;
    next.shards.push_back(std::move(e));
    open_.reset();
  }
  if (!pending_errors_.empty()) {
    append_durably(dir_ / kErrorsFileName, pending_errors_);
    crash_point("errors-appended");
    next.errors_bytes += pending_errors_.size();
    next.skipped += pending_skipped_;
    pending_errors_.clear();
    pending_skipped_ = 0;
  }
  next.records = records_after;
  next.complete = complete;
  if (!next.shards.empty() && next.shards.size() > committed_.shards.size()) {
    next.shards.back().records_after = records_after;
    next.shards.back().errors_bytes_after = next.errors_bytes;
    next.shards.back().skipped_after = next.skipped;
  }
  // The renames are durable before the manifest names the files.
  fsync_directory(dir_);
  crash_point("before-manifest");
  on_commit_(next);
  crash_point("after-manifest");
  committed_ = std::move(next);
}

}  // namespace stoke
