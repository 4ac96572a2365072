// The optimizer step: the gradient's sum of squares, torch's clip
// coefficient, and fused AdamW over a flat parameter buffer.
//
// Determinism: no atomics. The sum of squares is two passes of fixed shape
// reducing in fixed trees: the same bits on every run (on any GPU — the order
// does not depend on the device's size), in double, as the CPU.
#include <cmath>

#include "core/error.h"
#include "cuda/kernels.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_common.cuh"

namespace stoke::cuda {

namespace {

constexpr int kThreads = 256;

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
// CPU kernel (src/cpu/fast/fast_optimizer.cc), every multiply and add
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

}  // namespace

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

}  // namespace stoke::cuda
