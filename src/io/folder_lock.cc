#include "io/folder_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "core/error.h"

namespace stoke {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

bool pid_alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

[[noreturn]] void fail(const fs::path& path, const char* step) {
  throw Error(Errc::io, path.string() + ": " + step + " failed: " + std::strerror(errno));
}

struct Holder {
  std::string text;  // the file as read
  std::string job, host;
  long pid = 0;
  bool known() const { return pid > 0; }
};

Holder parse_holder(std::string text) {
  Holder h;
  h.text = std::move(text);
  const json j = json::parse(h.text, nullptr, false);
  if (j.is_object() && j.value("pid", json()).is_number_integer()) {
    h.pid = j["pid"].get<long>();
    h.job = j.value("job", std::string("?"));
    h.host = j.value("host", std::string("?"));
  }
  return h;
}

std::string read_small(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// The holder writes its line just after it takes the lock: a second job that
// arrives in that instant waits briefly for it rather than naming nobody.
Holder read_holder(const fs::path& path) {
  Holder h;
  for (int i = 0; i < 20; ++i) {
    h = parse_holder(read_small(path));
    if (h.known()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return h;
}

[[noreturn]] void refuse_in_use(const fs::path& dir, const fs::path& lock_path, const Holder& h) {
  if (!h.known())
    throw Error(Errc::refused, dir.string() + " is in use by another stoke job (its lock file " + lock_path.string() +
                                   " names no holder); wait for it, or remove the lock file if no stoke job is "
                                   "writing there");
  throw Error(Errc::refused, dir.string() + " is in use by stoke " + h.job + ", pid " + std::to_string(h.pid) +
                                 " on host " + h.host + "; wait for it to finish or write to another folder");
}

void write_holder(int fd, const std::string& line, const fs::path& path) {
  if (::ftruncate(fd, 0) != 0) fail(path, "truncate");
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::pwrite(fd, line.data() + done, line.size() - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, "write");
    }
    done += static_cast<size_t>(n);
  }
}

bool same_file(int fd, const fs::path& path) {
  struct stat a, b;
  return ::fstat(fd, &a) == 0 && ::lstat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

bool flock_unsupported(int err) { return err == ENOSYS || err == EOPNOTSUPP || err == ENOLCK; }

}  // namespace

bool is_folder_lock_name(const fs::path& path) { return path.filename() == kFolderLockName; }

FolderLock FolderLock::acquire(const fs::path& dir, std::string_view job, FolderLockKind prefer) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error(Errc::invalid_argument, dir.string() + ": is a file (expected a folder)");
  const bool made_dir = fs::create_directories(dir, ec);
  if (ec) throw Error(Errc::io, dir.string() + ": cannot create the folder: " + ec.message());
  const fs::path path = dir / kFolderLockName;
  const std::string line =
      json{{"job", std::string(job)}, {"pid", static_cast<long>(::getpid())}, {"host", host_name()}}.dump() + "\n";

  FolderLock lock;
  if (prefer == FolderLockKind::flock) {
    bool no_flock = false;
    // A few rounds: a holder that is just releasing removes the file under us.
    for (int round = 0; round < 50 && !no_flock; ++round) {
      bool created = false;
      int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0 && errno == ENOENT) {
        fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno == EEXIST) continue;
        created = fd >= 0;
      }
      if (fd < 0) {
        if (errno == ELOOP) throw Error(Errc::refused, path.string() + ": is a symlink (expected stoke's lock file)");
        fail(path, "open the lock file");
      }
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
        // Locked, but perhaps a file its holder removed as we opened it: only
        // the file under the name counts.
        if (!same_file(fd, path)) {
          ::close(fd);
          continue;
        }
        try {
          write_holder(fd, line, path);
        } catch (...) {
          ::close(fd);
          throw;
        }
        lock.path_ = path;
        lock.fd_ = fd;
        lock.kind_ = FolderLockKind::flock;
        lock.made_dir_ = made_dir;
        return lock;
      }
      const int err = errno;
      ::close(fd);
      if (err == EINTR) continue;
      if (err == EWOULDBLOCK) refuse_in_use(dir, path, read_holder(path));
      if (!flock_unsupported(err)) {
        errno = err;
        fail(path, "flock");
      }
      if (created) ::unlink(path.c_str());  // ours and empty: the fallback creates it again
      no_flock = true;
    }
    if (!no_flock)
      throw Error(Errc::refused, dir.string() + ": could not take the lock file " + path.string() +
                                     " (other jobs keep taking and releasing it); try again");
  }

  // No flock here: the lock file's existence is the lock.
  for (int round = 0; round < 3; ++round) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
      try {
        write_holder(fd, line, path);
        if (::fsync(fd) != 0) fail(path, "fsync");
      } catch (...) {
        ::close(fd);
        ::unlink(path.c_str());
        throw;
      }
      ::close(fd);
      lock.path_ = path;
      lock.fd_ = -1;
      lock.kind_ = FolderLockKind::exclusive_file;
      lock.made_dir_ = made_dir;
      return lock;
    }
    if (errno != EEXIST) fail(path, "create the lock file");
    const Holder h = read_holder(path);
    // A holder on this host whose process is gone left the file behind (kill
    // -9, a crash): take it over. The file is read again just before it is
    // removed, so a holder that replaced it meanwhile is not thrown out.
    if (h.known() && h.host == host_name() && !pid_alive(h.pid) && read_small(path) == h.text) {
      ::unlink(path.c_str());
      continue;
    }
    refuse_in_use(dir, path, h);
  }
  throw Error(Errc::refused, dir.string() + ": could not take the lock file " + path.string() +
                                 " (other jobs keep taking it); try again");
}

FolderLock::FolderLock(FolderLock&& other) noexcept
    : path_(std::exchange(other.path_, {})),
      fd_(std::exchange(other.fd_, -1)),
      made_dir_(std::exchange(other.made_dir_, false)),
      kind_(other.kind_) {}

FolderLock& FolderLock::operator=(FolderLock&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::exchange(other.path_, {});
    fd_ = std::exchange(other.fd_, -1);
    made_dir_ = std::exchange(other.made_dir_, false);
    kind_ = other.kind_;
  }
  return *this;
}

FolderLock::~FolderLock() { release(); }

void FolderLock::release() noexcept {
  if (path_.empty()) return;
  // Removed while still held, so no one takes a lock on a file about to go
  // (acquire checks that the file it locked is still the one under the name).
  ::unlink(path_.c_str());
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  // rmdir removes only an empty folder: never anything a run wrote.
  if (made_dir_) ::rmdir(path_.parent_path().c_str());
  made_dir_ = false;
  path_.clear();
}

std::string FolderLock::note() const {
  if (kind_ == FolderLockKind::flock || path_.empty()) return "";
  return "the filesystem of " + path_.parent_path().string() +
         " has no flock: the folder is locked by the exclusively created file " + path_.string() +
         " (left behind by a job killed on another host; remove it by hand then)";
}

}  // namespace stoke
