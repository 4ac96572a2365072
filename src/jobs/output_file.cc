#include "jobs/output_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "io/atomic_file.h"

namespace stoke {

OutputFile::OutputFile(const std::string& path) : path_(path) {
  if (path == "-") {
    to_stdout_ = true;
    file_ = stdout;
    return;
  }
  const std::filesystem::path target(path);
  std::error_code ec;
  if (std::filesystem::is_directory(target, ec))
    throw Error(Errc::invalid_argument, path + ": is a folder (expected an output file path)");
  if (output_write_for(target) == OutputWrite::in_place) {
    in_place_ = true;
    const int fd = open_in_place(target);
    file_ = ::fdopen(fd, "wb");
    if (!file_) {
      ::close(fd);
      throw Error(Errc::io, path + ": cannot open: " + std::strerror(errno));
    }
    return;
  }
  tmp_ = target.parent_path() / (target.filename().string() + ".stoke-tmp-" + std::to_string(::getpid()));
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (!file_) throw Error(Errc::io, tmp_.string() + ": cannot create: " + std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (!to_stdout_ && !committed_ && file_) {
    std::fclose(file_);
    if (!in_place_) std::remove(tmp_.c_str());
  }
}

void OutputFile::write(std::string_view bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size())
    throw Error(Errc::io, (to_stdout_ ? std::string("<stdout>") : in_place_ ? path_ : tmp_.string()) + ": write failed: " +
                              std::strerror(errno));
}

void OutputFile::commit() {
  if (to_stdout_) {
    if (std::fflush(stdout) != 0) throw Error(Errc::io, std::string("<stdout>: write failed: ") + std::strerror(errno));
    committed_ = true;
    return;
  }
  if (in_place_) {
    if (std::fflush(file_) != 0) throw Error(Errc::io, path_ + ": write failed: " + std::strerror(errno));
    sync_in_place(::fileno(file_), path_);
    const int closed = std::fclose(file_);
    file_ = nullptr;
    if (closed != 0) throw Error(Errc::io, path_ + ": close failed: " + std::strerror(errno));
    committed_ = true;
    return;
  }
  if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) {
    throw Error(Errc::io, tmp_.string() + ": flush failed: " + std::strerror(errno));
  }
  std::fclose(file_);
  file_ = nullptr;
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::remove(tmp_.c_str());
    throw Error(Errc::io, path_ + ": rename failed: " + std::strerror(errno));
  }
  fsync_directory(std::filesystem::path(path_).parent_path());
  committed_ = true;
}

}  // namespace stoke
