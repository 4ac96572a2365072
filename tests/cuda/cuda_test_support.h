// What the CUDA tests share: a backend when a GPU is there (else the test is
// skipped with the reason), host tensors with seeded random values, moving
// them to and from the device, and relative errors.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/half.h"
#include "cuda/cuda_backend.h"
#include "cuda/device.h"

namespace stoke::test::cuda_support {

// The backend on GPU 0, or nullptr after GTEST_SKIP with the reason.
#define STOKE_REQUIRE_GPU(backend_var)                                                         \
  std::unique_ptr<cuda::CudaBackend> backend_var;                                              \
  do {                                                                                         \
    const std::string why = cuda::unavailable_reason();                                        \
    if (!why.empty()) GTEST_SKIP() << "no GPU here (" << why << "): CUDA op tests skipped";    \
    backend_var = std::make_unique<cuda::CudaBackend>(0);                                      \
  } while (0)

struct HostTensor {
  std::vector<uint64_t> storage;  // 8-byte aligned
  TensorView view;
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
    case DType::f32: t.as<float>()[i] = static_cast<float>(v); break;
    case DType::bf16: t.as<bf16>()[i] = to_bf16(static_cast<float>(v)); break;
    case DType::f16: t.as<f16>()[i] = to_f16(static_cast<float>(v)); break;
    case DType::i32: t.as<int32_t>()[i] = static_cast<int32_t>(v); break;
    default: break;
  }
}

inline double get(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::f32: return t.as<const float>()[i];
    case DType::bf16: return to_float(t.as<const bf16>()[i]);
    case DType::f16: return to_float(t.as<const f16>()[i]);
    case DType::i32: return t.as<const int32_t>()[i];
    default: return NAN;
  }
}

// splitmix64: the same stream everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53; }
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

// Device copies of host tensors, alive as long as this object.
class DeviceTensors {
 public:
  explicit DeviceTensors(Backend& b) : b_(b) {}
  ~DeviceTensors() { b_.drain(); }
  // A device tensor holding `host`'s values (an empty view stays empty).
  TensorView upload(const HostTensor& host) {
    if (host.view.empty()) return TensorView{};
    buffers_.push_back(b_.allocate(host.view.bytes()));
    TensorView v = host.view;
    v.data = buffers_.back()->data();
    b_.copy_to_device(v.data, host.view.data, host.view.bytes());
    return v;
  }
  // An uninitialised device tensor of the given dtype and shape.
  TensorView make(DType t, std::vector<int64_t> shape) {
    HostTensor h = host_tensor(t, std::move(shape));
    buffers_.push_back(b_.allocate(h.view.bytes()));
    TensorView v = h.view;
    v.data = buffers_.back()->data();
    return v;
  }
  // The device tensor's values, after waiting for the work before.
  HostTensor download(const TensorView& device) {
    HostTensor h = host_tensor(device.dtype, std::vector<int64_t>(device.dims.begin(), device.dims.begin() + device.rank));
    b_.copy_to_host(h.view.data, device.data, device.bytes());
    b_.synchronize();
    return h;
  }

 private:
  Backend& b_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

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

// Tolerances by the activation dtype (see tests/ops/test_ops.cc for the
// reasoning): f32 1e-5; bf16 2e-2; f16 2e-3 — the GPU keeps the same f32
// statistics and accumulation, so the CPU bounds hold.
inline double tolerance(DType t) { return t == DType::f32 ? 1e-5 : t == DType::bf16 ? 2e-2 : 2e-3; }

}  // namespace stoke::test::cuda_support
