#include "core/file_util.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace stoke {

std::string read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw Error(Errc::not_found, path.string() + ": no such file");
  }
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(Errc::io, path.string() + ": is a folder, expected a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::io, path.string() + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(Errc::io, path.string() + ": read failed");
  return ss.str();
}

TempFolder::TempFolder(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (!::mkdtemp(pattern.data())) throw Error(Errc::io, "cannot create a temporary folder " + pattern + ": " + std::strerror(errno));
  path_ = pattern;
}

TempFolder::~TempFolder() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace stoke
