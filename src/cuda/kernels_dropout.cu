// dropout (and dropout_backward, which is dropout applied to dy: the mask is
// a function of (seed, step, tensor_id, index) only). Philox in the CPU's
// element layout (core/philox.h), so the mask is the CPU's bit for bit.
#include "core/philox.h"
#include "cuda/kernels.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_common.cuh"

namespace stoke::cuda {

namespace {

constexpr int kThreads = 256;

// One thread per Philox block of 4 elements (one generator call each), as
// core/philox.h lays them out; x[0] is element `first` of the whole batch's
// tensor (the op's row_offset), so the blocks are those covering [first,
// first + n). x * 0 keeps NaN * 0 = NaN, as torch.
__global__ void dropout_kernel(void* out, const void* x, Elem e, int64_t n, float p, float scale, uint64_t seed,
                               uint32_t host_step, const uint32_t* device_step, uint32_t tensor_id, uint64_t first) {
  const uint32_t step = device_step ? *device_step : host_step;  // device: written by a copy before a replay
  const uint64_t b0 = first / 4;
  const int64_t blocks = static_cast<int64_t>((first + static_cast<uint64_t>(n) + 3) / 4 - b0);
  STOKE_GRID_STRIDE(b, blocks) {
    uint32_t w[4];
    philox::block_bits(seed, step, tensor_id, b0 + static_cast<uint64_t>(b), w);
    for (int j = 0; j < 4; ++j) {
      const int64_t i = static_cast<int64_t>(4 * (b0 + static_cast<uint64_t>(b)) + j - first);
      if (i < 0) continue;
      if (i >= n) break;
      const float factor = philox::uniform(w[j]) >= p ? scale : 0.0f;
      store(out, e, i, __fmul_rn(load(x, e, i), factor));
    }
  }
}

}  // namespace

void launch_dropout(cudaStream_t s, const TensorView& out, const TensorView& x, float p, uint64_t seed,
                    const Ops::DropoutStep& step, uint32_t tensor_id, uint64_t first) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;  // the f32 factor the CPU uses
  dropout_kernel<<<blocks_for((n + 3) / 4 + 1, kThreads), kThreads, 0, s>>>(
      out.data, x.data, elem_of(x.dtype), n, p, scale, seed, step.value, step.device.as<const uint32_t>(), tensor_id,
      first);
  check_launch("dropout_kernel");
}

}  // namespace stoke::cuda
