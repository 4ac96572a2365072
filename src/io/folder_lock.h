// One writer per output folder (DESIGN "Safety rules", RELIABILITY 15): a job
// that writes a folder holds an exclusive lock on `<folder>/.stoke.lock` for
// its whole run, taken before it looks at, removes or writes anything there.
// A second job into the same folder fails at once, naming the holder.
//
// The lock is flock(2) on the lock file: the kernel releases it when the
// holder exits, however it exits (kill -9 included). flock cannot say who
// holds it, so the holder writes its job, pid and host into the file. Some
// network filesystems have no flock (ENOSYS, EOPNOTSUPP, ENOLCK); there the
// lock is the lock file itself, created exclusively (O_EXCL), and a file left
// by a holder that died (same host, pid no longer alive) is taken over.
//
// The lock file is not output: embed's output detection, verify and
// --overwrite all pass it by (is_folder_lock_name).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace stoke {

inline constexpr const char* kFolderLockName = ".stoke.lock";

bool is_folder_lock_name(const std::filesystem::path& path);

enum class FolderLockKind {
  flock,           // flock(2) on the lock file
  exclusive_file,  // the lock file's existence (O_EXCL), where flock is missing
};

class FolderLock {
 public:
  // Creates `dir` when missing, then locks it for `job` ("embed", "train").
  // Throws Error(refused) naming the holder when another job holds it,
  // Error(invalid_argument) when `dir` is a file, Error(io) when the lock file
  // cannot be made. `prefer` exclusive_file skips flock (for tests of the
  // fallback; flock is used otherwise, wherever the filesystem has it).
  static FolderLock acquire(const std::filesystem::path& dir, std::string_view job,
                            FolderLockKind prefer = FolderLockKind::flock);
  FolderLock() = default;
  FolderLock(FolderLock&& other) noexcept;
  FolderLock& operator=(FolderLock&& other) noexcept;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  // Releases the lock and removes the lock file; a folder acquire() made is
  // removed too when nothing else is in it (a run that failed before writing
  // leaves no empty folder behind).
  ~FolderLock();

  FolderLockKind kind() const { return kind_; }
  // A line for the user when the lock is not a flock ("" otherwise).
  std::string note() const;
  const std::filesystem::path& path() const { return path_; }

 private:
  void release() noexcept;
  std::filesystem::path path_;  // the lock file; empty when not held
  int fd_ = -1;                 // open for flock's lifetime
  bool made_dir_ = false;       // acquire() created the folder
  FolderLockKind kind_ = FolderLockKind::flock;
};

}  // namespace stoke
