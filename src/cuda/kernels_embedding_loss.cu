// embedding_loss's kernels (the order and the GEMMs between them:
// kernels.h; the math: cpu/ref/ref_embedding_loss.cc; the
// same algorithm as the fast CPU kernel, cpu/fast/fast_embedding_loss.cc).
//
// The O(B M d) work is the cuBLASLt GEMMs around these kernels; everything
// here is O(B M) or less and runs in double (norms, the centre, the
// similarities' offsets, the softmax statistics and exponentials, the sums
// of G, the normalization's backward), as the reference does, so only the
// f32 GEMMs of centred rows separate the result from it.
//
// A block per row where a row is reduced (norms, softmax rows, the
// backward), a thread per column where columns are (the centre's chunks,
// column statistics and sums). Reductions are fixed trees of fixed shape.
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_common.cuh"
#include "cuda/kernels.h"

namespace stoke::cuda {

namespace {

using Kind = Ops::EmbeddingLoss::Kind;
using Layout = EmbeddingLossLayout;
constexpr int kThreads = 256;  // a multiple of 32 (the block reductions)
constexpr double kNormEps = 1e-12;

__device__ __forceinline__ double divisor(bool normalize, double norm) {
  return normalize ? fmax(norm, kNormEps) : 1.0;
}

// Max over the block in double (every thread gets it); scratch: 32 doubles.
__device__ double block_max(double v, double* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double t = lane < warps ? scratch[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) t = fmax(t, __shfl_xor_sync(0xffffffffu, t, o));
  return t;
}

// Min over the block of an index (every thread gets it); scratch: 32 of them.
__device__ long long block_min(long long v, long long* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    const long long other = __shfl_xor_sync(0xffffffffu, v, o);
    v = other < v ? other : v;
  }
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  long long t = lane < warps ? scratch[lane] : INT64_MAX;
  for (int o = 16; o > 0; o >>= 1) {
    const long long other = __shfl_xor_sync(0xffffffffu, t, o);
    t = other < t ? other : t;
  }
  return t;
}

// The workspace's pieces.
struct Work {
  double *center, *center_partial, *norm, *offset, *rank1, *anchor_loss, *anchor_hit, *column_lse, *pair_sim,
      *pair_grad, *pair_max, *pair_sum, *scalars;
  float *v, *dv, *sim;
};

Work work_of(const TensorView& workspace, const EmbeddingLossShape& sh) {
  const Layout l = embedding_loss_layout(sh.B, sh.groups, sh.d);
  float* w = workspace.as<float>();
  auto f64 = [&](int64_t at) { return reinterpret_cast<double*>(w + at); };  // 8-byte aligned: the check
  Work k;
  k.center = f64(l.center);
  k.center_partial = f64(l.center_partial);
  k.norm = f64(l.norm);
  k.offset = f64(l.offset);
  k.rank1 = f64(l.rank1);
  k.anchor_loss = f64(l.anchor_loss);
  k.anchor_hit = f64(l.anchor_hit);
  k.column_lse = f64(l.column_lse);
  k.pair_sim = f64(l.pair_sim);
  k.pair_grad = f64(l.pair_grad);
  k.pair_max = f64(l.pair_max);
  k.pair_sum = f64(l.pair_sum);
  k.scalars = f64(l.scalars);
  k.v = w + l.v;
  k.dv = w + l.dv;
  k.sim = w + l.sim;
  return k;
}

// ---- rows ----------------------------------------------------------------------------

// norm[i] = ||x_i[0:d)||, a block per row.
__global__ void row_norms_kernel(double* norm, const float* x, int64_t D, int64_t d) {
  __shared__ double scratch[32];
  const int64_t i = blockIdx.x;
  double sq = 0.0;
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) {
    const double v = x[i * D + k];
    sq += v * v;
  }
  sq = block_sum(sq, scratch);
  if (threadIdx.x == 0) norm[i] = sqrt(sq);
}

// partial[chunk, k] = sum of u_ik over the chunk's rows, in row order: a
// thread per column k, a grid row per chunk of kCenterChunkRows rows.
__global__ void center_partial_kernel(double* partial, const float* x, const double* norm, int64_t R, int64_t D,
                                      int64_t d, bool normalize) {
  const int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (k >= d) return;
  const int64_t chunk = blockIdx.y, first = chunk * Layout::kCenterChunkRows;
  const int64_t last = first + Layout::kCenterChunkRows < R ? first + Layout::kCenterChunkRows : R;
  double sum = 0.0;
  for (int64_t i = first; i < last; ++i) sum += x[i * D + k] * (1.0 / divisor(normalize, norm[i]));
  partial[chunk * d + k] = sum;
}

// c_k = (sum of the chunks, in order) / R; scalars[kCC] = c . c. One block.
__global__ void center_final_kernel(double* center, double* scalars, const double* partial, int64_t chunks,
                                    int64_t R, int64_t d) {
  __shared__ double scratch[32];
  double cc = 0.0;
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) {
    double sum = 0.0;
    for (int64_t c = 0; c < chunks; ++c) sum += partial[c * d + k];
    const double ck = sum / static_cast<double>(R);
    center[k] = ck;
    cc += ck * ck;
  }
  cc = block_sum(cc, scratch);
  if (threadIdx.x == 0) scalars[Layout::kCC] = cc;
}

// v_i = f32(u_i - c), offset_i = c . v_i (of the rounded v), a block per row.
__global__ void center_rows_kernel(float* v, double* offset, const float* x, const double* norm,
                                   const double* center, int64_t D, int64_t d, bool normalize) {
  __shared__ double scratch[32];
  const int64_t i = blockIdx.x;
  const double inv = 1.0 / divisor(normalize, norm[i]);
  double off = 0.0;
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) {
    const float vk = static_cast<float>(x[i * D + k] * inv - center[k]);
    v[i * d + k] = vk;
    off += center[k] * vk;
  }
  off = block_sum(off, scratch);
  if (threadIdx.x == 0) offset[i] = off;
}

// ---- the mnrl kinds' softmax ------------------------------------------------------------

// z of anchor b and candidate j: scale * s(a_b, cand_j), s from the GEMM of
// the centred rows plus the offsets (EmbeddingLossLayout).
__device__ __forceinline__ double z_at(const float* sim, const double* offset, double cc, double scale, int64_t B,
                                       int64_t M, int64_t b, int64_t j) {
  return scale * (static_cast<double>(sim[b * M + j]) + offset[b] + offset[B + j] + cc);
}

// mnrl_symmetric's d2q statistics: column_lse[j] = lse over the anchors b of
// z_bj (positive j < B), a thread per positive, an online log-sum-exp.
__global__ void column_lse_kernel(double* column_lse, const float* sim, const double* offset, const double* scalars,
                                  double scale, int64_t B, int64_t M) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= B) return;
  const double cc = scalars[Layout::kCC];
  double m = -INFINITY, sum = 0.0;
  for (int64_t b = 0; b < B; ++b) {
    const double z = z_at(sim, offset, cc, scale, B, M, b, j);
    if (z > m) {
      sum = sum * exp(m - z) + 1.0;
      m = z;
    } else {
      sum += exp(z - m);
    }
  }
  column_lse[j] = m + log(sum);
}

// A block per anchor b: its row's first maximum, log-sum-exp, loss term and
// hit; with grad, G(b, j) = dL/ds written over sim's row and its sum
// rank1[b]. column_lse: null for mnrl.
__global__ void softmax_rows_kernel(float* sim, double* anchor_loss, double* anchor_hit, double* rank1,
                                    const double* offset, const double* scalars, const double* column_lse,
                                    double scale, double coef, int64_t B, int64_t M, bool grad) {
  __shared__ double scratch[32];
  __shared__ long long index_scratch[32];
  const int64_t b = blockIdx.x;
  const double cc = scalars[Layout::kCC];
  // Each thread walks its columns in increasing order: its first maximum.
  double mine = -INFINITY;
  long long mine_at = INT64_MAX;
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
    const double z = z_at(sim, offset, cc, scale, B, M, b, j);
    if (z > mine) {
      mine = z;
      mine_at = j;
    }
  }
  const double mx = block_max(mine, scratch);
  const long long best = block_min(mine == mx ? mine_at : INT64_MAX, index_scratch);
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) sum += exp(z_at(sim, offset, cc, scale, B, M, b, j) - mx);
  sum = block_sum(sum, scratch);
  const double lse = mx + log(sum), zbb = z_at(sim, offset, cc, scale, B, M, b, b);
  if (threadIdx.x == 0) {
    anchor_loss[b] = column_lse ? 0.5 * (lse + column_lse[b]) - zbb : lse - zbb;
    anchor_hit[b] = best == b ? 1.0 : 0.0;
  }
  if (!grad) return;
  __syncthreads();  // every thread has read z_bb before its column is overwritten
  const double f = scale * coef;
  double rs = 0.0;
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
    const double z = z_at(sim, offset, cc, scale, B, M, b, j), hit = j == b ? 1.0 : 0.0;
    double g = exp(z - lse) - hit;
    // d2q row j (a positive) holds z_bj as its anchor-b entry.
    if (column_lse && j < B) g += exp(z - column_lse[j]) - hit;
    const float stored = static_cast<float>(f * g);
    sim[b * M + j] = stored;
    rs += stored;
  }
  rs = block_sum(rs, scratch);
  if (threadIdx.x == 0) rank1[b] = rs;
}

// rank1[B + j] = sum over the anchors b of G(b, j), in order: a thread per column.
__global__ void column_sums_kernel(double* rank1, const float* g, int64_t B, int64_t M) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= M) return;
  double sum = 0.0;
  for (int64_t b = 0; b < B; ++b) sum += g[b * M + j];
  rank1[B + j] = sum;
}

// ---- the pair kinds ---------------------------------------------------------------------

// pair_sim[b] = u_a . u_p, a block per pair.
__global__ void pair_sim_kernel(double* pair_sim, const float* x, const double* norm, int64_t B, int64_t D, int64_t d,
                                bool normalize) {
  __shared__ double scratch[32];
  const int64_t b = blockIdx.x;
  double dot = 0.0;
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x)
    dot += static_cast<double>(x[b * D + k]) * x[(B + b) * D + k];
  dot = block_sum(dot, scratch);
  if (threadIdx.x == 0) pair_sim[b] = dot / (divisor(normalize, norm[b]) * divisor(normalize, norm[B + b]));
}

// CosineSimilarityLoss: anchor_loss[b] = (s_b - y_b)^2, dL/ds = 2 (s_b - y_b) / B.
__global__ void cosine_mse_kernel(double* anchor_loss, double* pair_grad, const double* pair_sim, const float* y,
                                  int64_t B) {
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < B; b += int64_t{gridDim.x} * blockDim.x) {
    const double diff = pair_sim[b] - y[b];
    anchor_loss[b] = diff * diff;
    pair_grad[b] = 2.0 * diff / static_cast<double>(B);
  }
}

// CoSENT, a block per i: pair_max[i] = max(0, max over j with y_i < y_j of z_i - z_j).
__global__ void cosent_max_kernel(double* pair_max, const double* pair_sim, const float* y, double scale, int64_t B) {
  __shared__ double scratch[32];
  const int64_t i = blockIdx.x;
  double m = 0.0;
  for (int64_t j = threadIdx.x; j < B; j += blockDim.x)
    if (y[i] < y[j]) m = fmax(m, scale * (pair_sim[i] - pair_sim[j]));
  m = block_max(m, scratch);
  if (threadIdx.x == 0) pair_max[i] = m;
}

// scalars[kPairMax] = max_i pair_max[i] (>= 0: the 0 term). One block.
__global__ void cosent_global_max_kernel(double* scalars, const double* pair_max, int64_t B) {
  __shared__ double scratch[32];
  double m = 0.0;
  for (int64_t i = threadIdx.x; i < B; i += blockDim.x) m = fmax(m, pair_max[i]);
  m = block_max(m, scratch);
  if (threadIdx.x == 0) scalars[Layout::kPairMax] = m;
}

// pair_sum[i] = sum over j with y_i < y_j of e^(z_i - z_j - m), a block per i.
__global__ void cosent_sum_kernel(double* pair_sum, const double* pair_sim, const double* scalars, const float* y,
                                  double scale, int64_t B) {
  __shared__ double scratch[32];
  const int64_t i = blockIdx.x;
  const double m = scalars[Layout::kPairMax];
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < B; j += blockDim.x)
    if (y[i] < y[j]) sum += exp(scale * (pair_sim[i] - pair_sim[j]) - m);
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) pair_sum[i] = sum;
}

// scalars[kPairLoss] = L = m + log(e^-m + sum_i pair_sum[i]). One block.
__global__ void cosent_loss_kernel(double* scalars, const double* pair_sum, int64_t B) {
  __shared__ double scratch[32];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < B; i += blockDim.x) sum += pair_sum[i];
  sum = block_sum(sum, scratch);
  const double m = scalars[Layout::kPairMax];
  if (threadIdx.x == 0) scalars[Layout::kPairLoss] = m + log(exp(-m) + sum);
}

// pair_grad[i] = dL/ds_i = scale * (sum_{j: y_i < y_j} w_ij - sum_{j: y_j < y_i} w_ji),
// w_ij = e^(z_i - z_j - L): a block per i.
__global__ void cosent_grad_kernel(double* pair_grad, const double* pair_sim, const double* scalars, const float* y,
                                   double scale, int64_t B) {
  __shared__ double scratch[32];
  const int64_t i = blockIdx.x;
  const double L = scalars[Layout::kPairLoss];
  double g = 0.0;
  for (int64_t j = threadIdx.x; j < B; j += blockDim.x) {
    const double zij = scale * (pair_sim[i] - pair_sim[j]);
    if (y[i] < y[j]) g += exp(zij - L);
    if (y[j] < y[i]) g -= exp(-zij - L);
  }
  g = block_sum(g, scratch);
  if (threadIdx.x == 0) pair_grad[i] = scale * g;
}

// ---- the backward and the metrics ---------------------------------------------------------

// A block per row i. Its gradient with respect to u_i is
//   g_k = dv[i, k] + rank1[i] * c_k                         (mnrl kinds: dv set)
//   g_k = pair_grad[b] / n_p * x[p, k]                      (pair kinds: p = i's partner)
// and d_emb[i, k] += factor * (g_k - u_k (u . g)) / n_i, the normalization's
// backward (no projection below the clamp or without normalize).
__global__ void backward_rows_kernel(float* d_emb, const float* x, const double* norm, const float* dv,
                                     const double* rank1, const double* center, const double* pair_grad, int64_t B,
                                     int64_t D, int64_t d, bool normalize, double factor) {
  __shared__ double scratch[32];
  const int64_t i = blockIdx.x;
  const double inv = 1.0 / divisor(normalize, norm[i]);
  const bool project = normalize && norm[i] > kNormEps;
  const int64_t p = i < B ? i + B : i - B;
  const double alpha = dv ? 0.0 : pair_grad[i < B ? i : i - B] / divisor(normalize, norm[p]);
  const double beta = dv ? rank1[i] : 0.0;
  auto grad_at = [&](int64_t k) {
    return dv ? static_cast<double>(dv[i * d + k]) + beta * center[k] : alpha * x[p * D + k];
  };
  double along = 0.0;
  if (project)
    for (int64_t k = threadIdx.x; k < d; k += blockDim.x) along += x[i * D + k] * inv * grad_at(k);
  along = block_sum(along, scratch);  // every thread calls it: it synchronizes
  const double f = factor * inv;
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x)
    d_emb[i * D + k] =
        static_cast<float>(static_cast<double>(d_emb[i * D + k]) + f * (grad_at(k) - x[i * D + k] * inv * along));
}

// metrics[0] += weight * (L * B); with count, metrics[1] += hits, metrics[2] += B. One block.
__global__ void metrics_kernel(double* metrics, const double* anchor_loss, const double* anchor_hit,
                               const double* scalars, int64_t B, bool cosent, bool hits, double weight, bool count) {
  __shared__ double scratch[32];
  double loss = 0.0, hit = 0.0;
  for (int64_t b = threadIdx.x; b < B; b += blockDim.x) {
    if (!cosent) loss += anchor_loss[b];
    if (hits) hit += anchor_hit[b];
  }
  loss = block_sum(loss, scratch);
  hit = block_sum(hit, scratch);
  if (threadIdx.x != 0) return;
  metrics[0] += weight * (cosent ? scalars[Layout::kPairLoss] * static_cast<double>(B) : loss);
  if (count) {
    metrics[1] += hit;
    metrics[2] += static_cast<double>(B);
  }
}

unsigned blocks_of(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// A grid of one block per row: the x dimension takes up to 2^31 - 1.
unsigned rows_grid(int64_t rows) {
  if (rows > INT32_MAX) throw Error(Errc::unsupported, "cuda embedding_loss: at most 2^31 - 1 rows");
  return static_cast<unsigned>(rows);
}

}  // namespace

void launch_embedding_loss_rows(cudaStream_t s, const TensorView& emb, const TensorView& workspace,
                                const EmbeddingLossShape& sh, const Ops::EmbeddingLoss& loss) {
  const Work w = work_of(workspace, sh);
  const float* x = emb.as<const float>();
  row_norms_kernel<<<rows_grid(sh.R), kThreads, 0, s>>>(w.norm, x, sh.D, sh.d);
  check_launch("embedding_loss row_norms_kernel");
  if (loss.kind == Kind::cosent || loss.kind == Kind::cosine_mse) return;
  const int64_t chunks = (sh.R + Layout::kCenterChunkRows - 1) / Layout::kCenterChunkRows;
  if (chunks > 65535) throw Error(Errc::unsupported, "cuda embedding_loss: at most 65535 * 128 rows");
  center_partial_kernel<<<dim3(blocks_of(sh.d), static_cast<unsigned>(chunks)), kThreads, 0, s>>>(
      w.center_partial, x, w.norm, sh.R, sh.D, sh.d, loss.normalize);
  check_launch("embedding_loss center_partial_kernel");
  center_final_kernel<<<1, kThreads, 0, s>>>(w.center, w.scalars, w.center_partial, chunks, sh.R, sh.d);
  check_launch("embedding_loss center_final_kernel");
  center_rows_kernel<<<rows_grid(sh.R), kThreads, 0, s>>>(w.v, w.offset, x, w.norm, w.center, sh.D, sh.d,
                                                          loss.normalize);
  check_launch("embedding_loss center_rows_kernel");
}

void launch_embedding_loss_softmax(cudaStream_t s, const TensorView& workspace, const EmbeddingLossShape& sh,
                                   const Ops::EmbeddingLoss& loss, bool grad) {
  const Work w = work_of(workspace, sh);
  const bool sym = loss.kind == Kind::mnrl_symmetric;
  const double scale = loss.scale;
  if (sym) {
    column_lse_kernel<<<blocks_of(sh.B), kThreads, 0, s>>>(w.column_lse, w.sim, w.offset, w.scalars, scale, sh.B,
                                                           sh.M);
    check_launch("embedding_loss column_lse_kernel");
  }
  // Each direction's cross-entropy is a mean over B; the symmetric loss averages the two.
  const double coef = (sym ? 0.5 : 1.0) / static_cast<double>(sh.B);
  softmax_rows_kernel<<<rows_grid(sh.B), kThreads, 0, s>>>(w.sim, w.anchor_loss, w.anchor_hit, w.rank1, w.offset,
                                                           w.scalars, sym ? w.column_lse : nullptr, scale, coef,
                                                           sh.B, sh.M, grad);
  check_launch("embedding_loss softmax_rows_kernel");
  if (!grad) return;
  column_sums_kernel<<<blocks_of(sh.M), kThreads, 0, s>>>(w.rank1, w.sim, sh.B, sh.M);
  check_launch("embedding_loss column_sums_kernel");
}

void launch_embedding_loss_pairs(cudaStream_t s, const TensorView& emb, const TensorView& scores,
                                 const TensorView& workspace, const EmbeddingLossShape& sh,
                                 const Ops::EmbeddingLoss& loss) {
  const Work w = work_of(workspace, sh);
  const float* y = scores.as<const float>();
  pair_sim_kernel<<<rows_grid(sh.B), kThreads, 0, s>>>(w.pair_sim, emb.as<const float>(), w.norm, sh.B, sh.D, sh.d,
                                                       loss.normalize);
  check_launch("embedding_loss pair_sim_kernel");
  if (loss.kind == Kind::cosine_mse) {
    cosine_mse_kernel<<<blocks_of(sh.B), kThreads, 0, s>>>(w.anchor_loss, w.pair_grad, w.pair_sim, y, sh.B);
    check_launch("embedding_loss cosine_mse_kernel");
    return;
  }
  const double scale = loss.scale;
  cosent_max_kernel<<<rows_grid(sh.B), kThreads, 0, s>>>(w.pair_max, w.pair_sim, y, scale, sh.B);
  check_launch("embedding_loss cosent_max_kernel");
  cosent_global_max_kernel<<<1, kThreads, 0, s>>>(w.scalars, w.pair_max, sh.B);
  check_launch("embedding_loss cosent_global_max_kernel");
  cosent_sum_kernel<<<rows_grid(sh.B), kThreads, 0, s>>>(w.pair_sum, w.pair_sim, w.scalars, y, scale, sh.B);
  check_launch("embedding_loss cosent_sum_kernel");
  cosent_loss_kernel<<<1, kThreads, 0, s>>>(w.scalars, w.pair_sum, sh.B);
  check_launch("embedding_loss cosent_loss_kernel");
  cosent_grad_kernel<<<rows_grid(sh.B), kThreads, 0, s>>>(w.pair_grad, w.pair_sim, w.scalars, y, scale, sh.B);
  check_launch("embedding_loss cosent_grad_kernel");
}

void launch_embedding_loss_backward(cudaStream_t s, const TensorView& d_emb, const TensorView& emb,
                                    const TensorView& workspace, const EmbeddingLossShape& sh,
                                    const Ops::EmbeddingLoss& loss) {
  const Work w = work_of(workspace, sh);
  const bool pairs = loss.kind == Kind::cosent || loss.kind == Kind::cosine_mse;
  const double factor = static_cast<double>(loss.grad_scale) * loss.weight;
  backward_rows_kernel<<<rows_grid(sh.R), kThreads, 0, s>>>(d_emb.as<float>(), emb.as<const float>(), w.norm,
                                                            pairs ? nullptr : w.dv, w.rank1, w.center, w.pair_grad,
                                                            sh.B, sh.D, sh.d, loss.normalize, factor);
  check_launch("embedding_loss backward_rows_kernel");
}

void launch_embedding_loss_metrics(cudaStream_t s, const TensorView& metrics, const TensorView& workspace,
                                   const EmbeddingLossShape& sh, const Ops::EmbeddingLoss& loss) {
  const Work w = work_of(workspace, sh);
  const bool pairs = loss.kind == Kind::cosent || loss.kind == Kind::cosine_mse;
  metrics_kernel<<<1, kThreads, 0, s>>>(metrics.as<double>(), w.anchor_loss, w.anchor_hit, w.scalars, sh.B,
                                        loss.kind == Kind::cosent, !pairs, static_cast<double>(loss.weight),
                                        loss.count);
  check_launch("embedding_loss metrics_kernel");
}

}  // namespace stoke::cuda
