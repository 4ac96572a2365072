// Small helpers for files: reading whole files with errors that name the
// file, and scratch folders.
#pragma once

#include <filesystem>
#include <string>

namespace stoke {

// Reads a file into a string; throws Error(io / not_found) naming the path.
std::string read_file(const std::filesystem::path& path);

// A fresh folder in the system's temporary directory ("<prefix>-XXXXXX"),
// removed with everything in it when the object goes. Throws Error(io).
class TempFolder {
 public:
  explicit TempFolder(const std::string& prefix);
  ~TempFolder();
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace stoke
