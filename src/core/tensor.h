// A view of a dense, row-major tensor in some memory (host or device): a
// pointer, an element type and up to 4 dimensions. Views own nothing; buffers
// are owned by whoever allocated them (a backend, a safetensors mapping).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dtype.h"

namespace stoke {

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  int rank = 0;
  std::array<int64_t, 4> dims{};

  TensorView() = default;
  TensorView(void* d, DType t, std::initializer_list<int64_t> shape) : data(d), dtype(t) {
    for (int64_t n : shape) dims[static_cast<size_t>(rank++)] = n;
  }

  bool empty() const { return data == nullptr; }
  int64_t dim(int i) const { return dims[static_cast<size_t>(i)]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[static_cast<size_t>(i)];
    return n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
  // Rows [first, first + count) of the leading dimension.
  TensorView rows(int64_t first, int64_t count) const {
    TensorView v = *this;
    const int64_t row = rank > 0 ? numel() / dims[0] : 1;
    v.data = static_cast<char*>(data) + static_cast<size_t>(first * row) * dtype_size(dtype);
    v.dims[0] = count;
    return v;
  }
  std::string shape_string() const;
};

}  // namespace stoke
