// Reads everything written into a FIFO, on its own thread, for the tests of
// outputs that must be written into an existing FIFO rather than replace it.
// The read end is opened non-blocking first, so a writer's open never waits
// and a writer that never comes (one that renames over the FIFO instead)
// cannot hang the test: after done(), the reader drains and stops.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>

namespace stoke::test {

class FifoReader {
 public:
  explicit FifoReader(const std::filesystem::path& fifo) {
    fd_ = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    thread_ = std::thread([this] { run(); });
  }
  ~FifoReader() { finish(); }
  bool opened() const { return fd_ >= 0; }
  // The writer has returned; everything it wrote is in the pipe or read.
  // Returns all bytes read.
  const std::string& finish() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    return bytes_;
  }

 private:
  void run() {
    if (fd_ < 0) return;
    char buf[65536];
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, 20);
      if (ready > 0 && (p.revents & POLLIN)) {
        const ssize_t n = ::read(fd_, buf, sizeof buf);
        if (n > 0) {
          bytes_.append(buf, static_cast<size_t>(n));
          continue;
        }
      }
      // Nothing to read now: stop once the writer has hung up, or has returned.
      if ((ready > 0 && (p.revents & POLLHUP)) || done_) {
        ssize_t n;
        while ((n = ::read(fd_, buf, sizeof buf)) > 0) bytes_.append(buf, static_cast<size_t>(n));
        return;
      }
    }
  }
  int fd_ = -1;
  std::atomic<bool> done_{false};
  std::string bytes_;
  std::thread thread_;
};

// The (device, inode, type) of a path itself (lstat): what "not replaced" means.
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  mode_t type = 0;
  bool operator==(const FileIdentity&) const = default;
};

inline FileIdentity identity_of(const std::filesystem::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  return {st.st_dev, st.st_ino, static_cast<mode_t>(st.st_mode & S_IFMT)};
}

}  // namespace stoke::test
