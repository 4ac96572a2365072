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

#include "support/device_tensors.h"
#include "support/host_tensors.h"
#include "cuda/cuda_backend.h"
#include "cuda/device.h"
#include "cuda/device_errors.h"

namespace stoke::test::cuda_support {

using namespace host_tensors;

// The backend on GPU 0, or nullptr after GTEST_SKIP with the reason. After
// a sticky fault (an earlier case's kernel broke the context) every later
// case FAILS naming it: skipping would hide it behind "no GPU" advice.
#define STOKE_REQUIRE_GPU(backend_var)                                                                     \
  std::unique_ptr<cuda::CudaBackend> backend_var;                                                          \
  do {                                                                                                     \
    if (const auto fault = cuda::sticky_fault()) FAIL() << "the GPU is unusable: " << fault->describe();   \
    const std::string why = cuda::unavailable_reason();                                                    \
    if (!why.empty()) GTEST_SKIP() << "no GPU here (" << why << "): CUDA op tests skipped";                \
    backend_var = std::make_unique<cuda::CudaBackend>(0);                                                  \
  } while (0)

using DeviceTensors = test::DeviceTensors;  // support/device_tensors.h

// Tolerances by the activation dtype (see tests/ops/test_ops.cc for the
// reasoning): f32 1e-5; bf16 2e-2; f16 2e-3 — the GPU keeps the same f32
// statistics and accumulation, so the CPU bounds hold.
inline double tolerance(DType t) { return t == DType::f32 ? 1e-5 : t == DType::bf16 ? 2e-2 : 2e-3; }

}  // namespace stoke::test::cuda_support
