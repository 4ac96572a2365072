// A regular file mapped read-only into memory: the readers of weight files
// hand out spans into it instead of copying gigabytes (zero-copy), and the
// kernel pages in only what is touched.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace stoke {

class MappedFile {
 public:
  // Throws Error(io) naming the path and the step that failed (open, stat,
  // mmap), or when the path is not a regular file. An empty file maps to an
  // empty span (mmap of length 0 is an error).
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  void* mapping_ = nullptr;
};

}  // namespace stoke
