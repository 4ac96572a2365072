#include "io/npy_stream.h"

#include <string>

#include "core/error.h"
#include "io/npy.h"

namespace stoke {

NpyStreamWriter::NpyStreamWriter(std::filesystem::path path, DType dtype, int64_t cols)
    : path_(std::move(path)), dtype_(dtype), cols_(cols), file_(path_) {
  if (!npy_descr(dtype_)) throw Error(Errc::invalid_argument, path_.string() + ": npy arrays are f32, f16, i32 or i64");
  if (cols_ < 0) throw Error(Errc::invalid_argument, path_.string() + ": negative column count");
  row_bytes_ = static_cast<size_t>(cols_ == 0 ? 1 : cols_) * dtype_size(dtype_);
  file_.append(std::string(kReservedHeader, ' '));
}

void NpyStreamWriter::append(std::span<const std::byte> rows) {
  if (rows.size() % row_bytes_ != 0)
    throw Error(Errc::internal, path_.string() + ": " + std::to_string(rows.size()) + " bytes is not a whole number of " +
                                    std::to_string(row_bytes_) + "-byte rows");
  file_.append(rows);
  rows_ += static_cast<int64_t>(rows.size() / row_bytes_);
}

void NpyStreamWriter::commit() {
  const int64_t shape_1d[] = {rows_};
  const int64_t shape_2d[] = {rows_, cols_};
  const std::string header = cols_ == 0 ? npy_header(dtype_, std::span<const int64_t>(shape_1d), kReservedHeader)
                                        : npy_header(dtype_, std::span<const int64_t>(shape_2d), kReservedHeader);
  if (header.size() != kReservedHeader) throw Error(Errc::internal, "npy header does not fit its reserved room");
  file_.write_at(0, std::span(reinterpret_cast<const std::byte*>(header.data()), header.size()));
  file_.commit();
}

}  // namespace stoke
