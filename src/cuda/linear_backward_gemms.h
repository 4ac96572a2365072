// linear_backward's two products on CUDA: da (+)= dy · w and dw += dy^T · a.
// Where dy is f32 and w, a are 16-bit (bf16/f16 training; gemm_routes.h), dy
// is rounded to 16 bits in row chunks of the workspace — once per chunk for
// both products — and cuBLASLt multiplies them on the tensor cores with f32
// accumulation into the gradients; dw takes chunk after chunk (beta = 1) in
// a fixed order, so the result does not vary run to run. f16: a dy beyond
// f16's range rounds to inf, and the loss scaler skips the step (what
// autocast's f16 gradients do). Other operand mixes go to GemmGeneral as
// they are.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "core/tensor.h"
#include "cuda/gemm_general.h"

namespace stoke::cuda {

struct DeviceWorkspace {
  void* data = nullptr;
  size_t bytes = 0;
};

void linear_backward_gemms(GemmGeneral& gemm, cudaStream_t stream, DeviceWorkspace dy_copy, const TensorView& da,
                           const TensorView& dw, const TensorView& dy, const TensorView& a, const TensorView& w,
                           bool da_accumulate);

}  // namespace stoke::cuda
