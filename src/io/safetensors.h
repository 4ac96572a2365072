// safetensors files: a strict, zero-copy reader (mmap) and a writer.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON header
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
// then the data section; offsets are relative to the start of the data section.
//
// Files come from the internet, so every check of RELIABILITY.md item 1 is made
// before any tensor is handed out, each with its own SafetensorsErrc, and memory
// stays bounded by the file size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace stoke {

enum class SafetensorsErrc {
  header_too_short,        // file shorter than the 8-byte length prefix
  header_too_large,        // header length over the 100 MB limit
  header_out_of_bounds,    // header length points past the end of the file
  header_not_utf8,         // header bytes are not valid UTF-8
  header_not_json,         // header is not parseable JSON
  header_not_object,       // header JSON is not an object
  metadata_not_string_map, // __metadata__ is not an object of string -> string
  entry_not_object,        // a tensor entry is not an object / has unknown keys
  missing_field,           // dtype, shape or data_offsets missing
  bad_dtype_field,         // dtype is not a string
  unknown_dtype,           // dtype string is not one stoke knows
  bad_shape,               // shape is not an array of non-negative integers
  shape_overflow,          // element count x dtype size overflows 64 bits
  bad_offsets,             // data_offsets not two non-negative integers
  offsets_reversed,        // begin > end
  offsets_out_of_range,    // end past the data section
  offsets_overlap,         // two tensors share bytes
  data_hole,               // bytes between tensors (or before the first) belong to none
  size_mismatch,           // end - begin differs from shape x dtype size
  trailing_bytes,          // bytes after the last tensor's data
  duplicate_name,          // the same key twice in one JSON object
  nul_in_name,             // a tensor name containing a NUL byte
  empty_name,              // a tensor named ""
  io,                      // the OS could not open / map / write the file
};

const char* safetensors_errc_name(SafetensorsErrc e);

class SafetensorsError : public Error {
 public:
  SafetensorsError(SafetensorsErrc kind, const std::string& message);
  SafetensorsErrc kind() const { return kind_; }

 private:
  SafetensorsErrc kind_;
};

// A view of one tensor's bytes inside the mapped file (valid while the file lives).
struct StoredTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;  // may be unaligned for dtype: copy before typed access
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Opens and validates; throws SafetensorsError (kind says which check failed).
  static std::shared_ptr<SafetensorsFile> open(const std::filesystem::path& path);
  // Validates an in-memory image (used by tests and fuzzers); the bytes are copied.
  static std::shared_ptr<SafetensorsFile> from_bytes(std::span<const std::byte> bytes,
                                                     std::string label = "<memory>");
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::vector<StoredTensor>& tensors() const { return tensors_; }  // in file-offset order
  const StoredTensor* find(std::string_view name) const;                 // nullptr when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  uint64_t file_size() const { return size_; }

 private:
  SafetensorsFile() = default;
  void parse(std::string_view label);

  std::filesystem::path path_;
  const std::byte* base_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;             // mmap'd region, or nullptr
  std::vector<std::byte> owned_;        // from_bytes storage
  std::vector<StoredTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// What to write: the caller keeps `data` alive until write_safetensors returns.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;
};

// Serialises tensors (sorted by name, header padded to 8 bytes) into bytes.
std::vector<std::byte> serialize_safetensors(const std::vector<TensorToWrite>& tensors,
                                             const std::map<std::string, std::string>& metadata = {});
// Writes atomically (temp file, fsync, rename, directory fsync).
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace stoke
