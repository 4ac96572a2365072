// Training kernels: activation backward, add, dropout (Philox, the CPU's
// element layout), bias+GELU with its pre-activation kept and its backward,
// the LayerNorm training forward and backward, the gradient's sum of squares
// and clip coefficient, fused AdamW over a flat parameter buffer, MSE, and
// f16 training's loss-scale ops (the scaler's state stays on the device).
//
// Determinism: no atomics anywhere here. Every parameter-gradient sum over
// tokens (dbias, dgamma, dbeta) is kernels_column_reduce.cuh's fixed chunks
// summed in a fixed order, and the sum of squares is two passes of fixed
// shape reducing in fixed trees: the same bits on every run (on any GPU — the order does not
// depend on the device's size). Arithmetic is in f32 (sums of squares in
// double, as the CPU), so the results match the CPU reference to the op
// table's tolerance, not bit for bit.
#include <cmath>

#include "core/error.h"
#include "core/philox.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_column_reduce.cuh"
#include "cuda/kernels_common.cuh"
#include "cuda/kernels_embedding.cuh"
#include "cuda/kernels_train.h"
#include "backend/loss_scale_rule.h"

namespace stoke::cuda {

namespace {

constexpr int kThreads = 256;

#define STOKE_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

// GELU_erf'(u) = Phi(u) + u phi(u).
__device__ __forceinline__ float gelu_erf_grad(float u) {
  const float Phi = 0.5f * erfcf(-u * 0.70710678118654752f);
  const float phi = expf(-0.5f * u * u) * 0.3989422804014327f;  // 1 / sqrt(2 pi)
  return Phi + u * phi;
}

__device__ __forceinline__ float gelu_erf(float u) { return 0.5f * u * (1.0f + erff(u * 0.70710678118654752f)); }

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

// One block per row: s = x + residual into shared memory (out may alias x or
// residual: the whole row is read before anything is written), two-pass
// mean and biased variance; the row, its statistics and the output until its
// rounding in double, as the inference kernels (kernels_layernorm.cu says
// why). mean and rstd are stored rounded to f32.
__global__ void residual_layernorm_train_kernel(void* out, Elem out_e, float* mean, float* rstd, const void* x,
                                                Elem x_e, const void* res, Elem res_e, const void* gamma,
                                                Elem gamma_e, const void* beta, Elem beta_e, int64_t H, float eps) {
  extern __shared__ double ln_row_wide[];  // H doubles
  __shared__ double scratch[32];
  double* row = ln_row_wide;
  const int64_t t = blockIdx.x;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    const double s = static_cast<double>(load(x, x_e, t * H + i)) + static_cast<double>(load(res, res_e, t * H + i));
    row[i] = s;
    sum += s;
  }
  const double mu = block_sum(sum, scratch) / static_cast<double>(H);
  double var = 0.0;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) var += (row[i] - mu) * (row[i] - mu);
  const double r = 1.0 / sqrt(block_sum(var, scratch) / static_cast<double>(H) + static_cast<double>(eps));
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x)
    store(out, out_e, t * H + i,
          static_cast<float>((row[i] - mu) * r * load(gamma, gamma_e, i) + load(beta, beta_e, i)));
  if (threadIdx.x == 0) {
    mean[t] = static_cast<float>(mu);
    rstd[t] = static_cast<float>(r);
  }
}

// What a row adds to dgamma and dbeta: dy s_hat and dy, s = x (+ residual).
struct LayerNormParamGradOf {
  const void* dy;
  Elem dy_e;
  const void* x;
  Elem x_e;
  const void* res;
  Elem res_e;
  const float* mean;
  const float* rstd;
  int64_t H;
  __device__ __forceinline__ void operator()(int64_t t, int64_t c, float (&acc)[2]) const {
    const int64_t i = t * H + c;
    const float d = load(dy, dy_e, i);
    const float s = load(x, x_e, i) + (res ? load(res, res_e, i) : 0.0f);
    acc[0] += d * ((s - mean[t]) * rstd[t]);
    acc[1] += d;
  }
};

// dx = ds, or dx += ds (accumulate: an f32 dx apart from dy, the pre-norm
// backward's residual add folded in). __fadd_rn keeps the add from being
// contracted with ds's last product into an FMA: ds is rounded first, as
// this kernel then add_kernel would round it.
__device__ __forceinline__ void write_dx(void* dx, Elem dx_e, int64_t k, float ds, bool accumulate) {
  if (accumulate)
    static_cast<float*>(dx)[k] = __fadd_rn(static_cast<const float*>(dx)[k], ds);
  else
    store(dx, dx_e, k, ds);
}

// ds = rstd (g - mean(g) - s_hat mean(g s_hat)), g = dy gamma; a block per
// row. The reductions' barriers order every read of the row before the
// first write, so dx may be dy (when not accumulating).
__global__ void layernorm_dx_kernel(void* dx, Elem dx_e, bool accumulate, const void* dy, Elem dy_e, const void* x,
                                    Elem x_e, const void* res, Elem res_e, const float* mean, const float* rstd,
                                    const void* gamma, Elem gamma_e, int64_t H) {
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  const float mu = mean[t], r = rstd[t];
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    const int64_t k = t * H + i;
    const float s = load(x, x_e, k) + (res ? load(res, res_e, k) : 0.0f);
    const float g = load(dy, dy_e, k) * load(gamma, gamma_e, i);
    sg += g;
    sgx += g * ((s - mu) * r);
  }
  const float mg = block_sum(sg, scratch) / static_cast<float>(H);
  const float mgx = block_sum(sgx, scratch) / static_cast<float>(H);
  // Each thread rewrites only the elements it read above (same stride), and
  // reads each again just before its own write.
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    const int64_t k = t * H + i;
    const float s = load(x, x_e, k) + (res ? load(res, res_e, k) : 0.0f);
    write_dx(dx, dx_e, k, r * (load(dy, dy_e, k) * load(gamma, gamma_e, i) - mg - (s - mu) * r * mgx), accumulate);
  }
}

// ---- H <= 1024: one warp per row, the row in registers (N values a lane at
// columns lane + 32 k), warp shuffles for the sums; four rows per block, no
// shared memory, no block barrier. Each element is read and written by one
// lane (aliasing as above). Sums in another order than the block kernels:
// equal within f32 rounding, not bit for bit.
constexpr int kLnWarpRows = 4;

int ln_warp_values(int64_t H) {
  for (int n : {4, 8, 16, 32})
    if (H <= 32 * n) return n;
  return 0;
}

unsigned ln_warp_blocks(int64_t T) { return static_cast<unsigned>((T + kLnWarpRows - 1) / kLnWarpRows); }

template <int N>
__global__ void residual_layernorm_train_warp_kernel(void* out, Elem out_e, float* mean, float* rstd, const void* x,
                                                     Elem x_e, const void* res, Elem res_e, const void* gamma,
                                                     Elem gamma_e, const void* beta, Elem beta_e, int64_t T, int64_t H,
                                                     float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t t = int64_t{blockIdx.x} * kLnWarpRows + (threadIdx.x >> 5);
  if (t >= T) return;  // the whole warp
  double v[N];  // in double, as the block kernel
  double sum = 0.0;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + 32 * k;
    v[k] = i < H ? static_cast<double>(load(x, x_e, t * H + i)) + static_cast<double>(load(res, res_e, t * H + i))
                 : 0.0;
    sum += v[k];
  }
  const double mu = warp_sum(sum) / static_cast<double>(H);
  double var = 0.0;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const double d = lane + 32 * k < H ? v[k] - mu : 0.0;
    var += d * d;
  }
  const double r = 1.0 / sqrt(warp_sum(var) / static_cast<double>(H) + static_cast<double>(eps));
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + 32 * k;
    if (i < H)
      store(out, out_e, t * H + i,
            static_cast<float>((v[k] - mu) * r * load(gamma, gamma_e, i) + load(beta, beta_e, i)));
  }
  if (lane == 0) {
    mean[t] = static_cast<float>(mu);
    rstd[t] = static_cast<float>(r);
  }
}

template <int N>
__global__ void layernorm_dx_warp_kernel(void* dx, Elem dx_e, bool accumulate, const void* dy, Elem dy_e,
                                         const void* x, Elem x_e, const void* res, Elem res_e, const float* mean,
                                         const float* rstd, const void* gamma, Elem gamma_e, int64_t T, int64_t H) {
  const int lane = threadIdx.x & 31;
  const int64_t t = int64_t{blockIdx.x} * kLnWarpRows + (threadIdx.x >> 5);
  if (t >= T) return;
  const float mu = mean[t], r = rstd[t];
  float xh[N], g[N];
  float sg = 0.0f, sgx = 0.0f;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + 32 * k;
    xh[k] = g[k] = 0.0f;
    if (i < H) {
      const int64_t e = t * H + i;
      const float sv = load(x, x_e, e) + (res ? load(res, res_e, e) : 0.0f);
      xh[k] = (sv - mu) * r;
      g[k] = load(dy, dy_e, e) * load(gamma, gamma_e, i);
    }
    sg += g[k];
    sgx += g[k] * xh[k];
  }
  const float mg = warp_sum(sg) / static_cast<float>(H);
  const float mgx = warp_sum(sgx) / static_cast<float>(H);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + 32 * k;
    if (i < H) write_dx(dx, dx_e, t * H + i, r * (g[k] - mg - xh[k] * mgx), accumulate);
  }
}

// out[0] += sum x_i^2 in double, in two passes of fixed shape (the same
// order on any GPU, whatever n): kSumBlocks blocks of kSumThreads, thread k
// of the grid summing elements k, k + kSumBlocks * kSumThreads, ... in order,
// each block a fixed tree into partial[block]; then one block sums the
// partials in a fixed tree. (The first version was the second pass alone
// over every element: one SM reading a bert-base gradient, milliseconds.)
constexpr int kSumThreads = 256;
constexpr int kSumBlocks = 1024;

// A fixed tree over part[0, n) (n a power of two, blockDim.x >= n / 2 ... n):
// part[0] holds the sum after it; every thread of the block calls it.
__device__ __forceinline__ void tree_sum(double* part, int n) {
  __syncthreads();
  for (int w = n / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kSumThreads) sum_squares_partials_kernel(double* partial, const void* x, Elem e,
                                                                           int64_t n) {
  __shared__ double part[kSumThreads];
  double s = 0.0;
  for (int64_t i = blockIdx.x * int64_t{kSumThreads} + threadIdx.x; i < n; i += int64_t{kSumBlocks} * kSumThreads) {
    const double v = load(x, e, i);
    s += v * v;
  }
  part[threadIdx.x] = s;
  tree_sum(part, kSumThreads);
  if (threadIdx.x == 0) partial[blockIdx.x] = part[0];
}

__global__ void __launch_bounds__(kSumBlocks) sum_squares_finish_kernel(void* out, bool out_f64,
                                                                        const double* partial) {
  __shared__ double part[kSumBlocks];
  part[threadIdx.x] = partial[threadIdx.x];
  tree_sum(part, kSumBlocks);
  if (threadIdx.x == 0) {
    if (out_f64)
      *static_cast<double*>(out) += part[0];
    else
      *static_cast<float*>(out) = static_cast<float>(static_cast<double>(*static_cast<float*>(out)) + part[0]);
  }
}

// torch's clip_grad_norm_ coefficient: the norm in f32, min(1, max / (norm + 1e-6)); NaN stays NaN.
__global__ void clip_scale_kernel(float* scale, const void* sumsq, bool f64, float max_norm) {
  const double ss = f64 ? *static_cast<const double*>(sumsq) : static_cast<double>(*static_cast<const float*>(sumsq));
  const float norm = static_cast<float>(sqrt(ss));
  const float coef = max_norm / (norm + 1e-6f);
  *scale = coef > 1.0f ? 1.0f : coef;
}

// torch.optim.AdamW's arithmetic in f32, operation for operation as the fast
// CPU kernel (src/cpu/fast/fast_train_optim.cc), every multiply and add
// rounded on its own (the _rn intrinsics: no fused multiply-add). Whether an
// element decays: `all`, or a binary search of the R sorted ranges (R == 0:
// none).
struct AdamWCoef {
  float decay, w1, beta2, w2, bc2_sqrt, eps, neg_step;
};
// The hyperparameters a kernel takes by value (Ops::AdamWStep less its
// device view: a kernel argument is plain data).
struct AdamWHyper {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;
};
// The f32 coefficients of step t at learning rate lr, formed in double and
// rounded once (as the CPU kernels), on the device: t and lr may come from
// device memory (a replayed optimizer-step graph, the loss scaler's count),
// and the eager launch forms them the same way, so a graph's step and the
// eager one give the same bits.
__device__ AdamWCoef adamw_coef(const AdamWHyper& hp, double t, double lr) {
  AdamWCoef k;
  k.decay = static_cast<float>(1.0 - lr * hp.weight_decay);
  k.w1 = static_cast<float>(1.0 - hp.beta1);
  k.beta2 = static_cast<float>(hp.beta2);
  k.w2 = static_cast<float>(1.0 - hp.beta2);
  k.bc2_sqrt = static_cast<float>(sqrt(1.0 - pow(hp.beta2, t)));
  k.eps = static_cast<float>(hp.eps);
  k.neg_step = static_cast<float>(-(lr / (1.0 - pow(hp.beta1, t))));
  return k;
}
// Each block's thread 0 forms the coefficients: t is hp.step, or
// per_step[kDeviceStep] (per_step: Ops::AdamWStep::device, or null), or —
// with f16 training's loss scaler — its step count + 1; lr is hp.lr or
// per_step[kDeviceLr]. A set found-inf flag skips the step (every block
// returns before writing).
__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, bool all,
                             const int64_t* ranges, int64_t R, const float* grad_scale, const double* scaler,
                             const double* per_step, AdamWHyper hp) {
  __shared__ AdamWCoef shared_k;
  __shared__ bool skip;
  if (threadIdx.x == 0) {
    skip = scaler && scaler[Ops::LossScaler::kFoundInf] != 0.0;
    if (!skip) {
      double t = per_step ? per_step[Ops::AdamWStep::kDeviceStep] : static_cast<double>(hp.step);
      if (scaler) t = scaler[Ops::LossScaler::kOptimizerSteps] + 1.0;
      shared_k = adamw_coef(hp, t, per_step ? per_step[Ops::AdamWStep::kDeviceLr] : hp.lr);
    }
  }
  __syncthreads();  // every thread reaches it: the early return is after
  if (skip) return;
  const AdamWCoef k = shared_k;
  const float s = grad_scale ? *grad_scale : 1.0f;
  STOKE_GRID_STRIDE(i, n) {
    bool decays = all;
    if (!all && R > 0) {
      int64_t lo = 0, hi = R - 1;  // the last range whose begin <= i
      if (ranges[0] <= i) {
        while (lo < hi) {
          const int64_t mid = lo + (hi - lo + 1) / 2;
          if (ranges[2 * mid] <= i)
            lo = mid;
          else
            hi = mid - 1;
        }
        decays = i < ranges[2 * lo + 1];
      }
    }
    const float gi = __fmul_rn(g[i], s);
    const float pi = decays ? __fmul_rn(p[i], k.decay) : p[i];
    const float mi = __fadd_rn(m[i], __fmul_rn(k.w1, __fsub_rn(gi, m[i])));
    const float vi = __fadd_rn(__fmul_rn(v[i], k.beta2), __fmul_rn(__fmul_rn(k.w2, gi), gi));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bc2_sqrt), k.eps);
    p[i] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(k.neg_step, mi), denom));
    m[i] = mi;
    v[i] = vi;
  }
}

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

// MSE over B rows by one block: dpred (may be pred) and the metrics {sum loss, 0, B} in f64, rows in a fixed tree.
__global__ void mse_kernel(float* dpred, double* metrics, const float* pred, const float* target, int64_t B,
                           float scale) {
  __shared__ double part[kThreads];
  double s = 0.0;
  for (int64_t b = threadIdx.x; b < B; b += blockDim.x) {
    const double diff = static_cast<double>(pred[b]) - target[b];
    s += diff * diff;
    if (dpred) dpred[b] = static_cast<float>(static_cast<double>(scale) * 2.0 * diff);
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0 && metrics) {
    metrics[0] += part[0];
    metrics[2] += static_cast<double>(B);
  }
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

// dh of sequence blockIdx.y, written in full, a thread per column.
__global__ void pool_backward_kernel(void* dh, Elem dh_e, const float* dout, const void* h, Elem h_e,
                                     const int32_t* cu, int64_t H, PoolingMode mode) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= H) return;
  const int64_t b = blockIdx.y, first = cu[b], len = cu[b + 1] - first;
  if (len == 0) return;
  const float g = dout[b * H + c];
  int64_t only = -1;  // the one token that gets g (cls, lasttoken, max); -1: all of them, scaled
  float each = 0.0f;
  switch (mode) {
    case PoolingMode::cls: only = 0; break;
    case PoolingMode::lasttoken: only = len - 1; break;
    case PoolingMode::max: {  // the first token holding the column's maximum
      only = 0;
      float best = load(h, h_e, first * H + c);
      for (int64_t t = 1; t < len; ++t) {
        const float v = load(h, h_e, (first + t) * H + c);
        if (v > best) {
          best = v;
          only = t;
        }
      }
      break;
    }
    case PoolingMode::mean: each = static_cast<float>(static_cast<double>(g) / static_cast<double>(len)); break;
    default: each = static_cast<float>(static_cast<double>(g) / sqrt(static_cast<double>(len))); break;
  }
  for (int64_t t = 0; t < len; ++t) store(dh, dh_e, (first + t) * H + c, only < 0 ? each : (t == only ? g : 0.0f));
}

// Softmax cross-entropy, one block: a thread per row (in double, as the CPU
// reference: the max's own term kept out of the log-sum), then the metrics
// summed by a fixed tree.
__global__ void cross_entropy_kernel(float* dlogits, double* metrics, const float* logits, const int32_t* labels,
                                     int64_t B, int64_t C, double eps, double scale) {
  __shared__ double loss_part[kThreads];
  __shared__ double correct_part[kThreads];
  double loss_sum = 0.0, correct = 0.0;
  for (int64_t b = threadIdx.x; b < B; b += blockDim.x) {
    const float* z = logits + b * C;
    int64_t best = 0;
    double sum_z = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      if (z[c] > z[best]) best = c;
      sum_z += z[c];
    }
    const double mx = z[best];
    double rest = 0.0;
    for (int64_t c = 0; c < C; ++c)
      if (c != best) rest += exp(static_cast<double>(z[c]) - mx);
    const double lse_shifted = log1p(rest), lse = mx + lse_shifted;
    const int32_t y = labels[b];
    loss_sum += lse_shifted - (1.0 - eps) * (static_cast<double>(z[y]) - mx) -
                eps * (sum_z / static_cast<double>(C) - mx);
    if (best == y) correct += 1.0;
    if (dlogits) {
      // Every z of the row is read above before any dlogits of it is written (dlogits may be logits);
      // the writes below read z[c] before writing the same c.
      for (int64_t c = 0; c < C; ++c) {
        const double target = (c == y ? 1.0 - eps : 0.0) + eps / static_cast<double>(C);
        const double diff = c == best ? (1.0 - target) - rest / (1.0 + rest) : exp(static_cast<double>(z[c]) - lse) - target;
        dlogits[b * C + c] = static_cast<float>(scale * diff);
      }
    }
  }
  loss_part[threadIdx.x] = loss_sum;
  correct_part[threadIdx.x] = correct;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) {
      loss_part[threadIdx.x] += loss_part[threadIdx.x + w];
      correct_part[threadIdx.x] += correct_part[threadIdx.x + w];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0 && metrics) {
    metrics[0] += loss_part[0];
    metrics[1] += correct_part[0];
    metrics[2] += static_cast<double>(B);
  }
}

// embed_layernorm_train: a block per token, the row in shared memory (double), as residual_layernorm_train.
__global__ void embed_layernorm_train_kernel(void* out, Elem out_e, float* mean, float* rstd, const int32_t* ids,
                                             const int32_t* positions, const int32_t* type_ids, const void* word,
                                             Elem we, const void* pos, Elem pe, const void* type, Elem te,
                                             const void* gamma, Elem gamma_e, const void* beta, Elem beta_e,
                                             int64_t H, float eps) {
  extern __shared__ double ln_row_wide[];  // H doubles
  __shared__ double scratch[32];
  double* row = ln_row_wide;
  const int64_t t = blockIdx.x;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    const double s = embedding_at_wide(ids, positions, type_ids, word, pos, type, we, pe, te, t, H, i);
    row[i] = s;
    sum += s;
  }
  const double mu = block_sum(sum, scratch) / static_cast<double>(H);
  double var = 0.0;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) var += (row[i] - mu) * (row[i] - mu);
  const double r = 1.0 / sqrt(block_sum(var, scratch) / static_cast<double>(H) + static_cast<double>(eps));
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x)
    store(out, out_e, t * H + i,
          static_cast<float>((row[i] - mu) * r * load(gamma, gamma_e, i) + load(beta, beta_e, i)));
  if (threadIdx.x == 0) {
    mean[t] = static_cast<float>(mu);
    rstd[t] = static_cast<float>(r);
  }
}

const void* or_null(const TensorView& t) { return t.empty() ? nullptr : t.data; }

dim3 rows_grid(int64_t T, int64_t N, int threads) {
  const int64_t x = (N + threads - 1) / threads;
  return dim3(static_cast<unsigned>(x < 1 ? 1 : x), static_cast<unsigned>(T < 1 ? 1 : (T > 65535 ? 65535 : T)));
}

}  // namespace

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

void launch_residual_layernorm_train(cudaStream_t s, const TensorView& out, const TensorView& mean,
                                     const TensorView& rstd, const TensorView& x, const TensorView& residual,
                                     const TensorView& gamma, const TensorView& beta, float eps) {
  const int64_t T = x.dim(0), H = x.dim(1);
  if (T == 0 || H == 0) return;
  switch (ln_warp_values(H)) {
#define STOKE_LN_TRAIN_WARP(N)                                                                                      \
  case N:                                                                                                            \
    residual_layernorm_train_warp_kernel<N><<<ln_warp_blocks(T), 32 * kLnWarpRows, 0, s>>>(                        \
        out.data, elem_of(out.dtype), mean.as<float>(), rstd.as<float>(), x.data, elem_of(x.dtype), residual.data,   \
        elem_of(residual.dtype), gamma.data, elem_of(gamma.dtype), beta.data, elem_of(beta.dtype), T, H, eps);       \
    check_launch("residual_layernorm_train_warp_kernel");                                                            \
    return;
    STOKE_LN_TRAIN_WARP(4)
    STOKE_LN_TRAIN_WARP(8)
    STOKE_LN_TRAIN_WARP(16)
    STOKE_LN_TRAIN_WARP(32)
#undef STOKE_LN_TRAIN_WARP
    default: break;
  }
  const size_t smem = static_cast<size_t>(H) * 8;  // the row in double
  if (smem > 40 * 1024) throw Error(Errc::unsupported, "cuda residual_layernorm_train: rows up to 5120 columns");
  residual_layernorm_train_kernel<<<static_cast<unsigned>(T), kThreads, smem, s>>>(
      out.data, elem_of(out.dtype), mean.as<float>(), rstd.as<float>(), x.data, elem_of(x.dtype), residual.data,
      elem_of(residual.dtype), gamma.data, elem_of(gamma.dtype), beta.data, elem_of(beta.dtype), H, eps);
  check_launch("residual_layernorm_train_kernel");
}

void launch_layernorm_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dx, const TensorView& dgamma,
                               const TensorView& dbeta, const TensorView& dy, const TensorView& x,
                               const TensorView& residual, const TensorView& mean, const TensorView& rstd,
                               const TensorView& gamma, Accumulate dx_acc) {
  const int64_t T = dy.dim(0), H = dy.dim(1);
  if (T == 0 || H == 0) return;
  const void* res = or_null(residual);
  const bool acc = dx_acc == Accumulate::yes;  // the shared check kept dx f32 then
  if (!dgamma.empty() || !dbeta.empty())  // first: dx may be dy
    column_reduce::launch<2>(s, scratch, {{dgamma.empty() ? nullptr : dgamma.as<float>(),
                                           dbeta.empty() ? nullptr : dbeta.as<float>()}},
                             LayerNormParamGradOf{dy.data, elem_of(dy.dtype), x.data, elem_of(x.dtype), res,
                                                  elem_of(residual.dtype), mean.as<const float>(),
                                                  rstd.as<const float>(), H},
                             T, H, "layernorm_backward dgamma/dbeta");
  switch (ln_warp_values(H)) {
#define STOKE_LN_DX_WARP(N)                                                                                         \
  case N:                                                                                                            \
    layernorm_dx_warp_kernel<N><<<ln_warp_blocks(T), 32 * kLnWarpRows, 0, s>>>(                                    \
        dx.data, elem_of(dx.dtype), acc, dy.data, elem_of(dy.dtype), x.data, elem_of(x.dtype), res,                  \
        elem_of(residual.dtype), mean.as<const float>(), rstd.as<const float>(), gamma.data, elem_of(gamma.dtype), T, \
        H);                                                                                                          \
    check_launch("layernorm_dx_warp_kernel");                                                                        \
    return;
    STOKE_LN_DX_WARP(4)
    STOKE_LN_DX_WARP(8)
    STOKE_LN_DX_WARP(16)
    STOKE_LN_DX_WARP(32)
#undef STOKE_LN_DX_WARP
    default: break;
  }
  layernorm_dx_kernel<<<static_cast<unsigned>(T), kThreads, 0, s>>>(
      dx.data, elem_of(dx.dtype), acc, dy.data, elem_of(dy.dtype), x.data, elem_of(x.dtype), res,
      elem_of(residual.dtype), mean.as<const float>(), rstd.as<const float>(), gamma.data, elem_of(gamma.dtype), H);
  check_launch("layernorm_dx_kernel");
}

void launch_sum_squares(cudaStream_t s, const Scratch& scratch, const TensorView& out, const TensorView& x) {
  if (scratch.bytes < kSumBlocks * sizeof(double))
    throw Error(Errc::internal, "cuda sum_squares: the reduction workspace is smaller than 8 KiB");
  auto* partial = static_cast<double*>(scratch.data);
  sum_squares_partials_kernel<<<kSumBlocks, kSumThreads, 0, s>>>(partial, x.data, elem_of(x.dtype), x.numel());
  check_launch("sum_squares_partials_kernel");
  sum_squares_finish_kernel<<<1, kSumBlocks, 0, s>>>(out.data, out.dtype == DType::f64, partial);
  check_launch("sum_squares_finish_kernel");
}

void launch_clip_scale(cudaStream_t s, const TensorView& scale, const TensorView& sumsq, float max_norm) {
  clip_scale_kernel<<<1, 1, 0, s>>>(scale.as<float>(), sumsq.data, sumsq.dtype == DType::f64, max_norm);
  check_launch("clip_scale_kernel");
}

void launch_adamw(cudaStream_t s, const TensorView& p, const TensorView& g, const TensorView& m, const TensorView& v,
                  const TensorView& decay_ranges, const TensorView& grad_scale, const TensorView& scaler,
                  const Ops::AdamWStep& hp) {
  const int64_t n = p.numel();
  if (n == 0) return;
  const AdamWHyper h{hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay, hp.step};
  const bool all = decay_ranges.rank == 0;
  adamw_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(
      p.as<float>(), g.as<const float>(), m.as<float>(), v.as<float>(), n, all,
      all ? nullptr : static_cast<const int64_t*>(decay_ranges.data), all ? 0 : decay_ranges.dim(0),
      grad_scale.empty() ? nullptr : grad_scale.as<const float>(), scaler.empty() ? nullptr : scaler.as<const double>(),
      hp.device.empty() ? nullptr : hp.device.as<const double>(), h);
  check_launch("adamw_kernel");
}

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

void launch_mse_loss(cudaStream_t s, const TensorView& dpred, const TensorView& metrics, const TensorView& pred,
                     const TensorView& target, float scale) {
  const int64_t B = pred.dim(0);
  if (B == 0) return;
  mse_kernel<<<1, kThreads, 0, s>>>(dpred.empty() ? nullptr : dpred.as<float>(),
                                    metrics.empty() ? nullptr : metrics.as<double>(), pred.as<const float>(),
                                    target.as<const float>(), B, scale);
  check_launch("mse_kernel");
}

void launch_gather_rows_backward(cudaStream_t s, const TensorView& dh, const TensorView& dout, const TensorView& rows) {
  const int64_t B = dout.dim(0), H = dh.dim(1);
  if (B == 0 || H == 0) return;
  gather_rows_backward_kernel<<<static_cast<unsigned>((H + kThreads - 1) / kThreads), kThreads, 0, s>>>(
      dh.data, elem_of(dh.dtype), dout.data, elem_of(dout.dtype), rows.as<const int32_t>(), B, H);
  check_launch("gather_rows_backward_kernel");
}

void launch_pool_backward(cudaStream_t s, const TensorView& dh, const TensorView& dout, const TensorView& h,
                          const TensorView& cu_seqlens, PoolingMode mode) {
  const int64_t T = dh.dim(0), H = dh.dim(1), B = cu_seqlens.dim(0) - 1;
  if (T == 0 || H == 0) return;
  check_cuda(cudaMemsetAsync(dh.data, 0, dh.bytes(), s), "cudaMemsetAsync");  // tokens of no sequence get 0
  if (B == 0) return;
  if (B > 65535) throw Error(Errc::unsupported, "cuda pool_backward: at most 65535 sequences per call");
  pool_backward_kernel<<<dim3(static_cast<unsigned>((H + kThreads - 1) / kThreads), static_cast<unsigned>(B)),
                         kThreads, 0, s>>>(dh.data, elem_of(dh.dtype), dout.as<const float>(), or_null(h),
                                           elem_of(h.dtype), cu_seqlens.as<const int32_t>(), H, mode);
  check_launch("pool_backward_kernel");
}

void launch_cross_entropy(cudaStream_t s, const TensorView& dlogits, const TensorView& metrics,
                          const TensorView& logits, const TensorView& labels, float label_smoothing, float scale) {
  const int64_t B = logits.dim(0), C = logits.dim(1);
  if (B == 0) return;
  cross_entropy_kernel<<<1, kThreads, 0, s>>>(dlogits.empty() ? nullptr : dlogits.as<float>(),
                                              metrics.empty() ? nullptr : metrics.as<double>(),
                                              logits.as<const float>(), labels.as<const int32_t>(), B, C,
                                              static_cast<double>(label_smoothing), static_cast<double>(scale));
  check_launch("cross_entropy_kernel");
}

void launch_embed_layernorm_train(cudaStream_t s, const TensorView& out, const TensorView& mean,
                                  const TensorView& rstd, const TensorView& ids, const TensorView& positions,
                                  const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                                  const TensorView& type, const TensorView& gamma, const TensorView& beta, float eps) {
  const int64_t T = out.dim(0), H = out.dim(1);
  if (T == 0 || H == 0) return;
  const size_t smem = static_cast<size_t>(H) * 8;  // the row in double
  if (smem > 40 * 1024) throw Error(Errc::unsupported, "cuda embed_layernorm_train: rows up to 5120 columns");
  embed_layernorm_train_kernel<<<static_cast<unsigned>(T), kThreads, smem, s>>>(
      out.data, elem_of(out.dtype), mean.as<float>(), rstd.as<float>(), ids.as<const int32_t>(),
      positions.as<const int32_t>(), type_ids.empty() ? nullptr : type_ids.as<const int32_t>(), word.data,
      elem_of(word.dtype), pos.data, elem_of(pos.dtype), or_null(type), elem_of(type.dtype), gamma.data,
      elem_of(gamma.dtype), beta.data, elem_of(beta.dtype), H, eps);
  check_launch("embed_layernorm_train_kernel");
}

}  // namespace stoke::cuda
