// NumPy .npy files (format 1.0): what numpy.load reads, memory-mappable.
// 2-D little-endian float32 or float16 arrays in C order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "core/dtype.h"

namespace stoke {

// The header (magic, version, length, dict padded with spaces to a multiple
// of 64 bytes, newline) for a C-order array of `dtype` (f32 or f16).
// min_bytes pads the header to at least that size (a multiple of 64), so a
// writer that streams rows can reserve room first and write the real row
// count over it at the end.
std::string npy_header(DType dtype, int64_t rows, int64_t cols, size_t min_bytes = 0);
// Writes header + data atomically (temp file, fsync, rename, folder fsync).
void write_npy(const std::filesystem::path& path, DType dtype, int64_t rows, int64_t cols,
               std::span<const std::byte> data);

}  // namespace stoke
