// A job's single output file: "-" streams to stdout; a new path or a regular
// file is written under a temporary name and renamed into place by commit(),
// so a failed or killed run never leaves a partial file under the real name;
// any other existing path (a device, a FIFO, a symlink such as /dev/stdout) is
// written into as it is and never replaced (io/atomic_file.h decides which).
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace stoke {

class OutputFile {
 public:
  explicit OutputFile(const std::string& path);
  ~OutputFile();  // without commit(): the temp file is removed
  void write(std::string_view bytes);
  void commit();

 private:
  std::string path_;
  std::filesystem::path tmp_;  // empty when writing to stdout or in place
  std::FILE* file_ = nullptr;
  bool to_stdout_ = false, in_place_ = false, committed_ = false;
};

}  // namespace stoke
