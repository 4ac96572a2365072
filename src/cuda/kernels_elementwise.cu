// Element-wise and row-copy kernels, each forward beside its training form
// and backward: bias + activation (bias_gelu_train keeps the pre-activation;
// bias_gelu_backward, tanh_backward, relu_backward), add (two gradient paths
// summed), dtype conversion, row gathers and their scatter-add backward,
// column slices, L2 normalisation of pooled rows.
//
// Determinism: no atomics. dbias is kernels_column_reduce.cuh's fixed chunks
// summed in a fixed order; gather_rows_backward adds repeated rows in row
// order. Arithmetic is in f32: the results match the CPU reference to the op
// table's tolerance, not bit for bit.
#include "cuda/kernels.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_column_reduce.cuh"
#include "cuda/kernels_common.cuh"

namespace stoke::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float activate(float u, Activation act) {
  switch (act) {
    case Activation::gelu_erf: return 0.5f * u * (1.0f + erff(u * 0.70710678118654752f));  // BERT's exact GELU
    case Activation::tanh: return tanhf(u);
    case Activation::relu: return fmaxf(u, 0.0f);
    default: return u;
  }
}

// GELU_erf'(u) = Phi(u) + u phi(u).
__device__ __forceinline__ float gelu_erf_grad(float u) {
  const float Phi = 0.5f * erfcf(-u * 0.70710678118654752f);
  const float phi = expf(-0.5f * u * u) * 0.3989422804014327f;  // 1 / sqrt(2 pi)
  return Phi + u * phi;
}

__device__ __forceinline__ float gelu_erf(float u) { return 0.5f * u * (1.0f + erff(u * 0.70710678118654752f)); }

__global__ void bias_act_kernel(void* x, Elem x_e, const void* bias, Elem bias_e, Activation act, int64_t n,
                                int64_t N) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    float u = load(x, x_e, i);
    if (bias) u += load(bias, bias_e, i % N);
    store(x, x_e, i, activate(u, act));
  }
}

// The vectorised form for 16-bit activations (issue 16, speed): a thread
// takes 8 adjacent columns (one 16-byte load and store) of rows y, y +
// gridDim.y, ...; the 8 bias values are read once into registers; 2-D
// indexing, no per-element modulo. The arithmetic per element is the generic
// kernel's (x + bias in f32, activate, round once), so the result is the same.
template <class T>
__global__ void bias_act_vec8_kernel(T* x, const void* bias, Elem bias_e, Activation act, int64_t rows, int64_t N) {
  const int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;  // this thread's 8-column group
  if (v * 8 >= N) return;
  float b[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) b[k] = bias ? load(bias, bias_e, v * 8 + k) : 0.0f;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    uint4* p = reinterpret_cast<uint4*>(x + r * N) + v;
    uint4 raw = *p;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      float u = static_cast<float>(e[k]) + b[k];
      u = activate(u, act);
      e[k] = static_cast<T>(u);  // round to nearest even, as store()
    }
    *p = raw;
  }
}

__global__ void convert_kernel(void* out, Elem out_e, const void* in, Elem in_e, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    store(out, out_e, i, load(in, in_e, i));
}

// out[b, 0:D) = in[row(b), 0:D) for rows of width `in_width`; row(b) =
// rows[b] when a row list is given, else b (a column slice).
__global__ void copy_rows_kernel(void* out, Elem out_e, const void* in, Elem in_e, const int32_t* rows, int64_t D,
                                 int64_t in_width) {
  const int64_t b = blockIdx.x;
  const int64_t r = rows ? rows[b] : b;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) store(out, out_e, b * D + i, load(in, in_e, r * in_width + i));
}

__global__ void l2_normalize_kernel(float* x, int64_t D) {
  __shared__ float scratch[32];
  float* row = x + blockIdx.x * D;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) ss += row[i] * row[i];
  const float norm = fmaxf(sqrtf(block_sum(ss, scratch)), 1e-12f);
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) row[i] = row[i] / norm;
}

// ---- the training forms and backwards

__global__ void tanh_backward_kernel(void* dx, Elem dx_e, const void* dy, Elem dy_e, const void* y, Elem y_e,
                                     int64_t n) {
  STOKE_GRID_STRIDE(i, n) {
    const float v = load(y, y_e, i);
    store(dx, dx_e, i, load(dy, dy_e, i) * (1.0f - v * v));
  }
}

__global__ void relu_backward_kernel(void* dx, Elem dx_e, const void* dy, Elem dy_e, const void* y, Elem y_e,
                                     int64_t n) {
  STOKE_GRID_STRIDE(i, n) store(dx, dx_e, i, load(y, y_e, i) > 0.0f ? load(dy, dy_e, i) : 0.0f);
}

// y += x: both read as f32, added in f32, rounded once to y's dtype.
__global__ void add_kernel(void* y, Elem y_e, const void* x, Elem x_e, int64_t n) {
  STOKE_GRID_STRIDE(i, n) store(y, y_e, i, load(y, y_e, i) + load(x, x_e, i));
}

// pre = x + bias (pre's dtype), x = GELU(x + bias) from the unrounded sum.
__global__ void bias_gelu_train_kernel(void* x, Elem x_e, void* pre, Elem pre_e, const void* bias, Elem bias_e,
                                       int64_t T, int64_t N) {
  for (int64_t t = blockIdx.y; t < T; t += gridDim.y)
    for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < N; c += int64_t{gridDim.x} * blockDim.x) {
      const int64_t i = t * N + c;
      const float v = load(x, x_e, i) + (bias ? load(bias, bias_e, c) : 0.0f);
      store(pre, pre_e, i, v);
      store(x, x_e, i, gelu_erf(v));
    }
}

// What a row adds to dbias: dy[t,c] GELU'(pre[t,c]).
struct GeluBiasGradOf {
  const void* dy;
  Elem dy_e;
  const void* pre;
  Elem pre_e;
  int64_t N;
  __device__ __forceinline__ void operator()(int64_t t, int64_t c, float (&acc)[1]) const {
    acc[0] += load(dy, dy_e, t * N + c) * gelu_erf_grad(load(pre, pre_e, t * N + c));
  }
};

__global__ void bias_gelu_dx_kernel(void* dx, Elem dx_e, const void* dy, Elem dy_e, const void* pre, Elem pre_e,
                                    int64_t n) {
  STOKE_GRID_STRIDE(i, n) store(dx, dx_e, i, load(dy, dy_e, i) * gelu_erf_grad(load(pre, pre_e, i)));
}

// dh[rows[b]] += dout[b]: a thread per column walks b in order, so repeated
// rows add up in b order with no race (no other thread touches the column).
__global__ void gather_rows_backward_kernel(void* dh, Elem dh_e, const void* dout, Elem dout_e, const int32_t* rows,
                                            int64_t B, int64_t H) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= H) return;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = int64_t{rows[b]} * H + c;
    store(dh, dh_e, i, load(dh, dh_e, i) + load(dout, dout_e, b * H + c));
  }
}

dim3 rows_grid(int64_t T, int64_t N, int threads) {
  const int64_t x = (N + threads - 1) / threads;
  return dim3(static_cast<unsigned>(x < 1 ? 1 : x), static_cast<unsigned>(T < 1 ? 1 : (T > 65535 ? 65535 : T)));
}

}  // namespace

void launch_bias_act(cudaStream_t s, const TensorView& x, const TensorView& bias, Activation act) {
  const int64_t n = x.numel(), N = x.dim(1);
  if (n == 0 || (bias.empty() && act == Activation::none)) return;
  const bool low = x.dtype == DType::bf16 || x.dtype == DType::f16;
  if (low && N % 8 == 0 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0) {
    const int64_t rows = n / N, groups = N / 8;
    const dim3 grid(static_cast<unsigned>((groups + kThreads - 1) / kThreads),
                    static_cast<unsigned>(rows < 4096 ? rows : 4096));
    const void* b = bias.empty() ? nullptr : bias.data;
    if (x.dtype == DType::bf16)
      bias_act_vec8_kernel<__nv_bfloat16><<<grid, kThreads, 0, s>>>(static_cast<__nv_bfloat16*>(x.data), b,
                                                                    elem_of(bias.dtype), act, rows, N);
    else
      bias_act_vec8_kernel<__half><<<grid, kThreads, 0, s>>>(static_cast<__half*>(x.data), b, elem_of(bias.dtype),
                                                             act, rows, N);
    check_launch("bias_act_vec8_kernel");
    return;
  }
  bias_act_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(x.data, elem_of(x.dtype), bias.empty() ? nullptr : bias.data,
                                                               elem_of(bias.dtype), act, n, N);
  check_launch("bias_act_kernel");
}

void launch_convert(cudaStream_t s, const TensorView& out, const TensorView& in) {
  const int64_t n = in.numel();
  if (n == 0 || out.data == in.data) return;  // the checks allow only an identical view to alias
  convert_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(out.data, elem_of(out.dtype), in.data, elem_of(in.dtype), n);
  check_launch("convert_kernel");
}

void launch_gather_rows(cudaStream_t s, const TensorView& out, const TensorView& h, const TensorView& rows) {
  const int64_t B = out.dim(0), H = out.dim(1);
  if (B == 0 || H == 0) return;
  copy_rows_kernel<<<static_cast<unsigned>(B), kThreads, 0, s>>>(out.data, elem_of(out.dtype), h.data, elem_of(h.dtype),
                                                                 rows.as<const int32_t>(), H, h.dim(1));
  check_launch("copy_rows_kernel (gather_rows)");
}

void launch_slice_columns(cudaStream_t s, const TensorView& out, const TensorView& in) {
  const int64_t B = out.dim(0), D = out.dim(1);
  if (B == 0 || D == 0) return;
  copy_rows_kernel<<<static_cast<unsigned>(B), kThreads, 0, s>>>(out.data, elem_of(out.dtype), in.data,
                                                                 elem_of(in.dtype), nullptr, D, in.dim(1));
  check_launch("copy_rows_kernel (slice_columns)");
}

void launch_l2_normalize(cudaStream_t s, const TensorView& x) {
  const int64_t B = x.dim(0), D = x.dim(1);
  if (B == 0 || D == 0) return;
  l2_normalize_kernel<<<static_cast<unsigned>(B), kThreads, 0, s>>>(x.as<float>(), D);
  check_launch("l2_normalize_kernel");
}

void launch_tanh_backward(cudaStream_t s, const TensorView& dx, const TensorView& dy, const TensorView& y) {
  const int64_t n = dx.numel();
  if (n == 0) return;
  tanh_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(dx.data, elem_of(dx.dtype), dy.data,
                                                                    elem_of(dy.dtype), y.data, elem_of(y.dtype), n);
  check_launch("tanh_backward_kernel");
}

void launch_relu_backward(cudaStream_t s, const TensorView& dx, const TensorView& dy, const TensorView& y) {
  const int64_t n = dx.numel();
  if (n == 0) return;
  relu_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(dx.data, elem_of(dx.dtype), dy.data,
                                                                    elem_of(dy.dtype), y.data, elem_of(y.dtype), n);
  check_launch("relu_backward_kernel");
}

void launch_add(cudaStream_t s, const TensorView& y, const TensorView& x) {
  const int64_t n = y.numel();
  if (n == 0) return;
  add_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(y.data, elem_of(y.dtype), x.data, elem_of(x.dtype), n);
  check_launch("add_kernel");
}

void launch_bias_gelu_train(cudaStream_t s, const TensorView& x, const TensorView& pre, const TensorView& bias) {
  const int64_t T = x.dim(0), N = x.dim(1);
  if (T == 0 || N == 0) return;
  bias_gelu_train_kernel<<<rows_grid(T, N, kThreads), kThreads, 0, s>>>(
      x.data, elem_of(x.dtype), pre.data, elem_of(pre.dtype), or_null(bias), elem_of(bias.dtype), T, N);
  check_launch("bias_gelu_train_kernel");
}

void launch_bias_gelu_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dx, const TensorView& dbias,
                               const TensorView& dy, const TensorView& pre) {
  const int64_t T = dy.dim(0), N = dy.dim(1);
  if (T == 0 || N == 0) return;
  if (!dbias.empty())  // first: dx may be dy
    column_reduce::launch<1>(s, scratch, {{dbias.as<float>()}},
                             GeluBiasGradOf{dy.data, elem_of(dy.dtype), pre.data, elem_of(pre.dtype), N}, T, N,
                             "bias_gelu_backward dbias");
  bias_gelu_dx_kernel<<<blocks_for(T * N, kThreads), kThreads, 0, s>>>(dx.data, elem_of(dx.dtype), dy.data,
                                                                       elem_of(dy.dtype), pre.data,
                                                                       elem_of(pre.dtype), T * N);
  check_launch("bias_gelu_dx_kernel");
}

void launch_gather_rows_backward(cudaStream_t s, const TensorView& dh, const TensorView& dout, const TensorView& rows) {
  const int64_t B = dout.dim(0), H = dh.dim(1);
  if (B == 0 || H == 0) return;
  gather_rows_backward_kernel<<<static_cast<unsigned>((H + kThreads - 1) / kThreads), kThreads, 0, s>>>(
      dh.data, elem_of(dh.dtype), dout.data, elem_of(dout.dtype), rows.as<const int32_t>(), B, H);
  check_launch("gather_rows_backward_kernel");
}

}  // namespace stoke::cuda
