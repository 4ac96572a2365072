// Crash-safe file replacement: the bytes go to a temporary file in the same
// folder, which is fsync'd, renamed over the target, and the folder fsync'd, so
// after a crash the target holds either the old or the new content, never a mix,
// and a temp file is never mistaken for the target.
//
// Only a regular file or a new path is ever replaced that way. A path that
// exists as anything else (a device node, a FIFO, a socket, a symlink such as
// /dev/stdout) is not ours to replace: it is opened, following links, and
// written into (DESIGN "Safety rules"). Renaming over /dev/null as root would
// replace the system's null device; renaming over a FIFO leaves its reader
// waiting forever.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <cstdint>
#include <string_view>

namespace stoke {

// How an output path is written: replaced (temp file + rename) when it is a
// regular file or does not exist; written in place otherwise (lstat decides,
// so a symlink counts as "otherwise" whatever it points at).
enum class OutputWrite { replace, in_place };
OutputWrite output_write_for(const std::filesystem::path& path);
// Opens a path output_write_for() says is written in place: write-only,
// following links, truncating what truncates (a regular file behind a
// symlink), creating the target of a dangling symlink. Returns the descriptor;
// throws Error(io) naming the path. A folder is refused (Error invalid_argument).
int open_in_place(const std::filesystem::path& path);
// fsync for a descriptor open_in_place() gave: a FIFO, a terminal or a device
// cannot be synced (EINVAL, ENOTSUP, EROFS), which is not an error there.
void sync_in_place(int fd, const std::filesystem::path& path);

// Throws Error(Errc::io) naming the path and the failing step (open, write, fsync, rename).
void write_file_atomic(const std::filesystem::path& path, std::span<const std::byte> bytes);
void write_file_atomic(const std::filesystem::path& path, std::string_view text);
// fsync a folder so a rename inside it is durable.
void fsync_directory(const std::filesystem::path& dir);
// A file written in pieces (a shard streamed row by row) that appears under
// its name only when committed: the bytes go to a temporary file in the same
// folder; commit() fsyncs it and renames it into place (the caller fsyncs the
// folder, once for several files). Destroyed uncommitted, the temp file is removed.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  void append(std::span<const std::byte> bytes);
  void append(std::string_view text);
  // Overwrites bytes already written (a header reserved at the start).
  void write_at(uint64_t offset, std::span<const std::byte> bytes);
  uint64_t size() const { return size_; }
  const std::filesystem::path& temp_path() const { return tmp_; }
  // Flushes, fsyncs and renames; throws Error(io) naming the step. No folder fsync.
  void commit();
  // Removes the temp file (also what the destructor does when not committed).
  void abandon() noexcept;

 private:
  void flush();
  std::filesystem::path path_, tmp_;
  int fd_ = -1;
  std::string buffer_;  // writes are gathered: rows arrive a few KB at a time
  uint64_t size_ = 0;
};

// True for the temporary names write_file_atomic uses ("<name>.stoke-tmp-<pid>-<n>").
bool is_temp_name(const std::filesystem::path& path);

}  // namespace stoke
