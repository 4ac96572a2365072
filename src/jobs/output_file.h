// A job's single output file: "-" streams to stdout; a path is written under a
// temporary name and renamed into place by commit(), so a failed or killed run
// never leaves a partial file under the real name.
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
  std::filesystem::path tmp_;
  std::FILE* file_ = nullptr;
  bool to_stdout_ = false, committed_ = false;
};

}  // namespace stoke
