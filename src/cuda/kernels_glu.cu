// glu / glu_backward: a thread per (token, column) pair of the gate and up
// halves; libm-accurate expf and erff/erfcf in f32, as the other element-wise
// kernels compute their activations.
#include "cuda/cuda_internal.h"
#include "cuda/kernels.h"
#include "cuda/kernels_common.cuh"

namespace stoke::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float glu_gate(float g, bool silu) {
  return silu ? g / (1.0f + expf(-g)) : 0.5f * g * (1.0f + erff(g * 0.70710678118654752f));
}

__device__ __forceinline__ float glu_gate_grad(float g, bool silu) {
  if (silu) {
    const float s = 1.0f / (1.0f + expf(-g));
    return s * (1.0f + g * (1.0f - s));
  }
  return 0.5f * erfcf(-g * 0.70710678118654752f) + g * 0.39894228040143268f * expf(-0.5f * g * g);
}

__global__ void glu_kernel(void* out, const void* x, Elem e, int64_t T, int64_t N, int64_t g_off, int64_t u_off,
                           bool silu) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= T * N) return;
  const int64_t t = j / N, n = j - t * N;
  const float g = load(x, e, t * 2 * N + g_off + n), u = load(x, e, t * 2 * N + u_off + n);
  store(out, e, j, glu_gate(g, silu) * u);
}

__global__ void glu_backward_kernel(void* dx, Elem dx_e, const void* dout, Elem dout_e, const void* x, Elem e,
                                    int64_t T, int64_t N, int64_t g_off, int64_t u_off, bool silu) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= T * N) return;
  const int64_t t = j / N, n = j - t * N, gi = t * 2 * N + g_off + n, ui = t * 2 * N + u_off + n;
  const float g = load(x, e, gi), u = load(x, e, ui), d = load(dout, dout_e, j);
  store(dx, dx_e, gi, d * u * glu_gate_grad(g, silu));
  store(dx, dx_e, ui, d * glu_gate(g, silu));
}

unsigned blocks(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

void launch_glu(cudaStream_t s, const TensorView& out, const TensorView& x, const Ops::Glu& glu) {
  const int64_t T = out.dim(0), N = out.dim(1);
  if (T * N == 0) return;
  glu_kernel<<<blocks(T * N), kThreads, 0, s>>>(out.data, x.data, elem_of(x.dtype), T, N, glu.act_on_second ? N : 0,
                                                glu.act_on_second ? 0 : N, glu.act == Ops::Glu::Act::silu);
  check_launch("glu_kernel");
}

void launch_glu_backward(cudaStream_t s, const TensorView& dx, const TensorView& dout, const TensorView& x,
                         const Ops::Glu& glu) {
  const int64_t T = dout.dim(0), N = dout.dim(1);
  if (T * N == 0) return;
  glu_backward_kernel<<<blocks(T * N), kThreads, 0, s>>>(dx.data, elem_of(dx.dtype), dout.data,
                                                         elem_of(dout.dtype), x.data, elem_of(x.dtype), T, N,
                                                         glu.act_on_second ? N : 0,
                                                         glu.act_on_second ? 0 : N, glu.act == Ops::Glu::Act::silu);
  check_launch("glu_backward_kernel");
}

}  // namespace stoke::cuda
