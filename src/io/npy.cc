#include "io/npy.h"

#include <cstring>
#include <vector>

#include "core/error.h"
#include "io/atomic_file.h"

namespace stoke {

std::string npy_header(DType dtype, int64_t rows, int64_t cols, size_t min_bytes) {
  const char* descr = dtype == DType::f32 ? "<f4" : dtype == DType::f16 ? "<f2" : nullptr;
  if (!descr) throw Error(Errc::invalid_argument, "npy: only float32 and float16 arrays are written");
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" +
                     std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  // magic (6) + version (2) + length (2) + dict + padding + '\n' = multiple of 64,
  // so the data is aligned for memory mapping.
  const size_t unpadded = 10 + dict.size() + 1;
  size_t padding = (64 - unpadded % 64) % 64;
  if (unpadded + padding < min_bytes) padding += (min_bytes - unpadded - padding + 63) / 64 * 64;
  if (10 + dict.size() + padding + 1 > 65535) throw Error(Errc::internal, "npy: header too long");
  dict.append(padding, ' ');
  dict.push_back('\n');
  std::string header("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(dict.size());
  header.push_back(static_cast<char>(len & 0xFF));
  header.push_back(static_cast<char>(len >> 8));
  return header + dict;
}

void write_npy(const std::filesystem::path& path, DType dtype, int64_t rows, int64_t cols,
               std::span<const std::byte> data) {
  const size_t expected = static_cast<size_t>(rows * cols) * dtype_size(dtype);
  if (data.size() != expected)
    throw Error(Errc::internal, "npy: " + std::to_string(data.size()) + " bytes for a " + std::to_string(rows) + "x" +
                                    std::to_string(cols) + " array");
  const std::string header = npy_header(dtype, rows, cols);
  std::vector<std::byte> bytes(header.size() + data.size());
  std::memcpy(bytes.data(), header.data(), header.size());
  if (!data.empty()) std::memcpy(bytes.data() + header.size(), data.data(), data.size());
  write_file_atomic(path, bytes);
}

}  // namespace stoke
