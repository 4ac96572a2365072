// The classification and regression losses: cross_entropy and mse_loss,
// forward and backward in one call, the metrics {loss sum, correct, count}
// accumulated on the device in f64 (no host read). One block each, rows in a
// fixed tree: the same bits on every run. (The embedding losses:
// kernels_embedding_loss.cu.)
#include "cuda/kernels.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_common.cuh"

namespace stoke::cuda {

namespace {

constexpr int kThreads = 256;

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

}  // namespace

void launch_mse_loss(cudaStream_t s, const TensorView& dpred, const TensorView& metrics, const TensorView& pred,
                     const TensorView& target, float scale) {
  const int64_t B = pred.dim(0);
  if (B == 0) return;
  mse_kernel<<<1, kThreads, 0, s>>>(dpred.empty() ? nullptr : dpred.as<float>(),
                                    metrics.empty() ? nullptr : metrics.as<double>(), pred.as<const float>(),
                                    target.as<const float>(), B, scale);
  check_launch("mse_kernel");
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

}  // namespace stoke::cuda
