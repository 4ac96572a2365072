#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/error.h"

namespace stoke {

namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const char* step, int fd) {
  const int saved = errno;
  if (fd >= 0) ::close(fd);
  throw Error(Errc::io, path.string() + ": " + step + " failed: " + std::strerror(saved));
}

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, "open", -1);
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, "stat", fd);
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(Errc::io, path.string() + ": not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) fail(path, "mmap", fd);
    mapping_ = m;
    data_ = static_cast<const std::byte*>(m);
  }
  ::close(fd);  // the mapping keeps the file's pages alive
  // A file truncated by another process while mapped raises SIGBUS on access;
  // stoke does not guard against concurrent writers of its inputs (as safetensors.cc).
}

MappedFile::~MappedFile() {
  if (mapping_) ::munmap(mapping_, size_);
}

}  // namespace stoke
