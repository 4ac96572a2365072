#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/crash_point.h"
#include "core/error.h"

namespace stoke {

namespace {

constexpr std::string_view kTempMarker = ".stoke-tmp-";

[[noreturn]] void fail(const std::filesystem::path& path, const char* step) {
  throw Error(Errc::io, path.string() + ": " + step + " failed: " + std::strerror(errno));
}

std::filesystem::path temp_name_for(const std::filesystem::path& path) {
  // pid + a process-wide counter: unique among concurrent writers, so two
  // threads or two tasks never write the same temp file.
  static std::atomic<uint64_t> counter{0};
  std::string name = path.filename().string();
  name += kTempMarker;
  name += std::to_string(::getpid()) + "-" + std::to_string(counter++);
  return path.parent_path() / name;
}

void write_all(int fd, const std::byte* data, size_t size, const std::filesystem::path& path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, "write");
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

bool is_temp_name(const std::filesystem::path& path) {
  return path.filename().string().find(kTempMarker) != std::string::npos;
}

void fsync_directory(const std::filesystem::path& dir) {
  std::filesystem::path d = dir.empty() ? std::filesystem::path(".") : dir;
  int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(d, "open folder for fsync");
  if (::fsync(fd) != 0) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    fail(d, "folder fsync");
  }
  ::close(fd);
}

OutputWrite output_write_for(const std::filesystem::path& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return OutputWrite::replace;  // a new path (or unreadable: open will say)
  return S_ISREG(st.st_mode) ? OutputWrite::replace : OutputWrite::in_place;
}

int open_in_place(const std::filesystem::path& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw Error(Errc::invalid_argument, path.string() + ": is a folder (expected an output file path)");
  // O_TRUNC matters only for a regular file behind a symlink; a FIFO or a
  // device ignores it. O_CREAT serves a dangling symlink (its target is made).
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, "open");
  return fd;
}

void sync_in_place(int fd, const std::filesystem::path& path) {
  if (::fsync(fd) == 0) return;
  if (errno == EINVAL || errno == ENOTSUP || errno == EROFS || errno == ENOTTY) return;
  fail(path, "fsync");
}

namespace {

void write_in_place(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  const int fd = open_in_place(path);
  try {
    write_all(fd, bytes.data(), bytes.size(), path);
    sync_in_place(fd, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) fail(path, "close");
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  if (output_write_for(path) == OutputWrite::in_place) return write_in_place(path, bytes);
  const std::filesystem::path tmp = temp_name_for(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(tmp, "create");
  try {
    write_all(fd, bytes.data(), bytes.size(), tmp);
    // Data must be on disk before the rename makes it visible under the real name.
    if (::fsync(fd) != 0) fail(tmp, "fsync");
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    fail(tmp, "close");
  }
  try {
    crash_point("before-rename");
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    fail(path, "rename");
  }
  // The rename itself is durable only once the folder entry is flushed.
  fsync_directory(path.parent_path());
}

void write_file_atomic(const std::filesystem::path& path, std::string_view text) {
  write_file_atomic(path, std::span<const std::byte>(reinterpret_cast<const std::byte*>(text.data()),
                                                     text.size()));
}

}  // namespace stoke

namespace stoke {

namespace {
constexpr size_t kWriteBuffer = 1 << 20;
}

AtomicFileWriter::AtomicFileWriter(std::filesystem::path path) : path_(std::move(path)), tmp_(temp_name_for(path_)) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(tmp_, "create");
}

AtomicFileWriter::~AtomicFileWriter() { abandon(); }

void AtomicFileWriter::append(std::span<const std::byte> bytes) {
  buffer_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  size_ += bytes.size();
  if (buffer_.size() >= kWriteBuffer) flush();
}

void AtomicFileWriter::append(std::string_view text) {
  append(std::span<const std::byte>(reinterpret_cast<const std::byte*>(text.data()), text.size()));
}

void AtomicFileWriter::flush() {
  if (fd_ < 0) throw Error(Errc::internal, tmp_.string() + ": write after commit");
  write_all(fd_, reinterpret_cast<const std::byte*>(buffer_.data()), buffer_.size(), tmp_);
  buffer_.clear();
}

void AtomicFileWriter::write_at(uint64_t offset, std::span<const std::byte> bytes) {
  flush();
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(tmp_, "write");
    }
    done += static_cast<size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  flush();
  if (::fsync(fd_) != 0) fail(tmp_, "fsync");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(tmp_, "close");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail(path_, "rename");
  tmp_.clear();
}

void AtomicFileWriter::abandon() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!tmp_.empty()) {
    ::unlink(tmp_.c_str());
    tmp_.clear();
  }
}

}  // namespace stoke
