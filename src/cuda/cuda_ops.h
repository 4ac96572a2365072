// The op table on the CUDA backend (cuda_ops.cc).
#pragma once

#include <memory>

#include "backend/ops.h"

namespace stoke::cuda {

class CudaBackend;
std::unique_ptr<Ops> make_cuda_ops(CudaBackend& backend);

}  // namespace stoke::cuda
