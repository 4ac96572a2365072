// What the CUDA tests share: a backend when a GPU is there (else the test is
// skipped with the reason), moving host tensors (support/host_tensors.h) to
// and from the device, and tolerances by dtype.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "support/host_tensors.h"
#include "cuda/cuda_backend.h"
#include "cuda/device.h"

namespace stoke::test::cuda_support {

using namespace host_tensors;

// The backend on GPU 0, or nullptr after GTEST_SKIP with the reason.
#define STOKE_REQUIRE_GPU(backend_var)                                                         \
  std::unique_ptr<cuda::CudaBackend> backend_var;                                              \
  do {                                                                                         \
    const std::string why = cuda::unavailable_reason();                                        \
    if (!why.empty()) GTEST_SKIP() << "no GPU here (" << why << "): CUDA op tests skipped";    \
    backend_var = std::make_unique<cuda::CudaBackend>(0);                                      \
  } while (0)

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

// Tolerances by the activation dtype (see tests/ops/test_ops.cc for the
// reasoning): f32 1e-5; bf16 2e-2; f16 2e-3 — the GPU keeps the same f32
// statistics and accumulation, so the CPU bounds hold.
inline double tolerance(DType t) { return t == DType::f32 ? 1e-5 : t == DType::bf16 ? 2e-2 : 2e-3; }

}  // namespace stoke::test::cuda_support
