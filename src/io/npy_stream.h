// A .npy file streamed in pieces: rows are appended as they come and the
// header, whose shape is known only at the end, is written over room reserved
// for it at the start. The file appears under its name only at commit()
// (io/atomic_file.h's AtomicFileWriter: temp file, fsync, rename); the caller
// fsyncs the folder, once for all the files of a commit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

#include "core/dtype.h"
#include "io/atomic_file.h"

namespace stoke {

class NpyStreamWriter {
 public:
  // cols = 0: a 1-D array [rows]; cols > 0: a 2-D array [rows, cols].
  // dtype: f32, f16, i32 or i64 (io/npy.h's npy_header).
  NpyStreamWriter(std::filesystem::path path, DType dtype, int64_t cols = 0);
  // Whole rows of elements already in `dtype`'s little-endian layout.
  void append(std::span<const std::byte> rows);
  int64_t rows() const { return rows_; }
  const std::filesystem::path& path() const { return path_; }
  // Writes the real header, fsyncs and renames; throws Error(io) naming the step.
  void commit();

  // Room for any shape a 64-bit count can spell (the header is padded to it).
  static constexpr size_t kReservedHeader = 128;

 private:
  std::filesystem::path path_;
  DType dtype_;
  int64_t cols_;
  size_t row_bytes_;
  int64_t rows_ = 0;
  AtomicFileWriter file_;
};

}  // namespace stoke
