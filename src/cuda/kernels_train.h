// The training launchers now sit with their families' forwards in
// cuda/kernels.h. This header stays only for includers outside the kernel
// files (gemm_general.cc, tests/cuda/test_cuda_ops.cc); once they include
// cuda/kernels.h it can go.
#pragma once

#include "cuda/kernels.h"
