// Host tensors for tests: dense storage with a TensorView, element access in
// any dtype the ops use, a seeded generator whose stream is the same
// everywhere (splitmix64), and the relative error of two tensors.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "core/tensor.h"

namespace stoke::test::host_tensors {

// Owns its storage; a copy is a deep copy whose view points at the copy.
struct HostTensor {
  std::vector<uint64_t> storage;  // 8-byte aligned
  TensorView view;

  HostTensor() = default;
  HostTensor(const HostTensor& o) : storage(o.storage), view(o.view) { rebind(o); }
  HostTensor& operator=(const HostTensor& o) {
    storage = o.storage;
    view = o.view;
    rebind(o);
    return *this;
  }
  HostTensor(HostTensor&&) = default;  // the vector's buffer moves with it: the view stays right
  HostTensor& operator=(HostTensor&&) = default;

 private:
  void rebind(const HostTensor& o) {
    if (o.view.data == o.storage.data()) view.data = storage.data();
  }
};

inline HostTensor host_tensor(DType t, std::vector<int64_t> shape) {
  HostTensor x;
  x.view.dtype = t;
  x.view.rank = static_cast<int>(shape.size());
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    x.view.dims[i] = shape[i];
    n *= shape[i];
  }
  x.storage.assign((static_cast<size_t>(n) * dtype_size(t) + 7) / 8 + 1, 0);
  x.view.data = x.storage.data();
  return x;
}

inline void set(const TensorView& t, int64_t i, double v) {
  switch (t.dtype) {
    case DType::f64: t.as<double>()[i] = v; break;
    case DType::f32: t.as<float>()[i] = static_cast<float>(v); break;
    case DType::bf16: t.as<bf16>()[i] = to_bf16(static_cast<float>(v)); break;
    case DType::f16: t.as<f16>()[i] = to_f16(static_cast<float>(v)); break;
    case DType::i32: t.as<int32_t>()[i] = static_cast<int32_t>(v); break;
    case DType::i64: t.as<int64_t>()[i] = static_cast<int64_t>(v); break;
    default: ADD_FAILURE() << "set: unexpected dtype"; break;
  }
}

inline double get(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::f64: return t.as<const double>()[i];
    case DType::f32: return t.as<const float>()[i];
    case DType::bf16: return to_float(t.as<const bf16>()[i]);
    case DType::f16: return to_float(t.as<const f16>()[i]);
    case DType::i32: return t.as<const int32_t>()[i];
    case DType::i64: return static_cast<double>(t.as<const int64_t>()[i]);
    default: return NAN;
  }
}

// splitmix64: a tiny seeded generator whose stream is the same everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // 24 random bits: exactly representable in f32, as the op tests draw them.
  double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 40) * 0x1.0p-24; }
  int32_t below(int32_t n) { return static_cast<int32_t>(next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t s_;
};

inline HostTensor random_tensor(Rng& rng, DType t, std::vector<int64_t> shape, double lo = -1, double hi = 1) {
  HostTensor x = host_tensor(t, std::move(shape));
  for (int64_t i = 0; i < x.view.numel(); ++i) set(x.view, i, rng.uniform(lo, hi));
  return x;
}

inline HostTensor index_tensor(const std::vector<int32_t>& v) {
  HostTensor x = host_tensor(DType::i32, {static_cast<int64_t>(v.size())});
  if (!v.empty()) std::memcpy(x.view.data, v.data(), v.size() * 4);
  return x;
}

// ||got - want|| / ||want|| over all elements.
inline double relative_error(const TensorView& got, const TensorView& want) {
  EXPECT_EQ(got.numel(), want.numel());
  double num = 0, den = 0;
  for (int64_t i = 0; i < std::min(got.numel(), want.numel()); ++i) {
    const double d = get(got, i) - get(want, i);
    num += d * d;
    den += get(want, i) * get(want, i);
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

}  // namespace stoke::test::host_tensors
