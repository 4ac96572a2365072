// NumPy .npy files (format 1.0): what numpy.load reads, memory-mappable.
// Writes little-endian float32 / float16 / int32 / int64 arrays in C order
// (2-D sentence vectors; 1-D indices and offsets of the sparse and ragged
// shards); reads back the header of any .npy file, strictly, so `stoke
// verify` can check what it holds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace stoke {

// The header (magic, version, length, dict padded with spaces to a multiple
// of 64 bytes, newline) for a C-order array of `dtype` (f32 or f16).
// min_bytes pads the header to at least that size (a multiple of 64), so a
// writer that streams rows can reserve room first and write the real row
// count over it at the end.
std::string npy_header(DType dtype, int64_t rows, int64_t cols, size_t min_bytes = 0);
// The same for any shape (1-D: "(n,)") and dtype f32, f16, i32 or i64.
std::string npy_header(DType dtype, std::span<const int64_t> shape, size_t min_bytes = 0);
// numpy's descr for f32, f16, i32, i64 ("<f4", "<f2", "<i4", "<i8"); nullptr for other dtypes.
const char* npy_descr(DType dtype);
// Writes header + data atomically (temp file, fsync, rename, folder fsync).
void write_npy(const std::filesystem::path& path, DType dtype, int64_t rows, int64_t cols,
               std::span<const std::byte> data);

// What a .npy header says. `descr` is numpy's dtype string as written ("<f4",
// "<f2", ...); `data_offset` is where the array data starts (header length).
struct NpyHeader {
  int major_version = 0;
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  size_t data_offset = 0;
};

// Parses the header at the start of `bytes` (which may hold more than the
// header). Strict, as numpy.lib.format reads it: magic, version 1.0/2.0/3.0,
// a Python dict literal with exactly the keys 'descr', 'fortran_order' and
// 'shape', ending in a newline. Throws Error(format) saying what is wrong.
NpyHeader parse_npy_header(std::string_view bytes);
// Reads only the header of the file; throws Error(io/not_found/format) naming it.
NpyHeader read_npy_header(const std::filesystem::path& path);
// Bytes per element for a descr ("<f4" -> 4, "<f2" -> 2, ...); 0 when unknown.
size_t npy_descr_itemsize(std::string_view descr);

// A whole C-order .npy file: its header and its data bytes. The file must
// hold exactly the header's element count (no more, no less: a shard cut
// short or with bytes appended is damaged); memory is the file's size.
struct NpyArray {
  NpyHeader header;
  std::vector<std::byte> data;
  int64_t numel() const;
};
// Throws Error(not_found / io / format) naming the file.
NpyArray read_npy(const std::filesystem::path& path);

}  // namespace stoke
