// f16 training's loss-scale ops (torch.amp.GradScaler): the scaler's state
// stays on the device; its slot layout and update rule are
// backend/loss_scale_rule.h's, shared with the CPU.
#include "cuda/kernels.h"
#include "backend/loss_scale_rule.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_common.cuh"

namespace stoke::cuda {

namespace {

constexpr int kThreads = 256;

// The loss-scale ops (f16 training). x *= scale in f32, rounded once.
__global__ void loss_scale_multiply_kernel(void* x, Elem e, int64_t n, const double* scaler) {
  const float scale = static_cast<float>(scaler[Ops::LossScaler::kScale]);
  STOKE_GRID_STRIDE(i, n) store(x, e, i, __fmul_rn(load(x, e, i), scale));
}

// g *= inv in f32 (inv = f32(1 / double(scale)), as torch), rounded once; any
// inf/NaN before the multiply sets the found-inf flag. Every writer stores
// the same 1.0, so the races are benign and the result deterministic.
__global__ void loss_scale_unscale_kernel(void* g, Elem e, int64_t n, double* scaler) {
  const float inv = inverse_loss_scale(static_cast<float>(scaler[Ops::LossScaler::kScale]));
  bool bad = false;
  STOKE_GRID_STRIDE(i, n) {
    const float v = load(g, e, i);
    bad |= !isfinite(v);
    store(g, e, i, __fmul_rn(v, inv));
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) scaler[Ops::LossScaler::kFoundInf] = 1.0;
}

__global__ void loss_scale_update_kernel(double* scaler, float growth_factor, float backoff_factor,
                                         int growth_interval) {
  update_loss_scaler_slots(scaler, growth_factor, backoff_factor, growth_interval);
}

}  // namespace

void launch_loss_scale_multiply(cudaStream_t s, const TensorView& x, const TensorView& scaler) {
  const int64_t n = x.numel();
  if (n == 0) return;
  loss_scale_multiply_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(x.data, elem_of(x.dtype), n,
                                                                          scaler.as<const double>());
  check_launch("loss_scale_multiply_kernel");
}

void launch_loss_scale_unscale(cudaStream_t s, const TensorView& g, const TensorView& scaler) {
  const int64_t n = g.numel();
  if (n == 0) return;
  loss_scale_unscale_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(g.data, elem_of(g.dtype), n,
                                                                         scaler.as<double>());
  check_launch("loss_scale_unscale_kernel");
}

void launch_loss_scale_update(cudaStream_t s, const TensorView& scaler, float growth_factor, float backoff_factor,
                              int growth_interval) {
  loss_scale_update_kernel<<<1, 1, 0, s>>>(scaler.as<double>(), growth_factor, backoff_factor, growth_interval);
  check_launch("loss_scale_update_kernel");
}

}  // namespace stoke::cuda
