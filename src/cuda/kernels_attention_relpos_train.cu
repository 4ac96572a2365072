// MPNet's relative-position attention for training, the exact path (f32
// arithmetic, any dtype, any head dim), as src/cpu/ref/ref_attention.cc
// defines it: the score of query i and key j carries the per-head bias
// rel[(j - i) + max_seqlen - 1, h]; the forward writes lse and drops
// probabilities out with the CPU's Philox element index
// (kernels_attention_train.cuh); the backward writes dqkv and drel.
//
// The layout of kernels_attention_train.cu: a block per (packed token, head)
// for the forward, dQ (the token as the query) and dK/dV (the token as the
// key), each output element one thread's sum in a fixed order. drel is a
// block per (distance, head): its threads walk the packed query rows in a
// fixed stride, recompute dS_ij for the key at that distance, and the block
// sums them in a fixed tree. No atomics: the results do not depend on
// scheduling (deterministic run to run), at the price of recomputing the
// scores once per pass — the correctness-first kernels the op table checks.
#include <cmath>

#include "core/error.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_attention_train.cuh"
#include "cuda/kernels_common.cuh"
#include "cuda/kernels_train.h"

namespace stoke::cuda {

namespace {

using namespace attention_train;

constexpr int kThreads = 128;

// The bias of query i and key j (positions in their sequence), head h.
__device__ __forceinline__ float bias(const float* rel, int i, int j, int h, int heads, int max_seqlen) {
  return rel[(int64_t{j} - i + max_seqlen - 1) * heads + h];
}

// out_i = sum_j P_ij m_ij v_j, lse_i = log sum_j exp(s_ij) (undropped),
// s_ij = q_i·k_j / sqrt(d) + bias.
__global__ void relpos_train_kernel(void* out, float* lse, const void* qkv, Elem e, const int32_t* cu, int B,
                                    int heads, int d, int max_seqlen, const float* rel, float scale, Dropout dr) {
  extern __shared__ float sm[];  // q (d), then the row's probabilities times the mask (len)
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  if (t >= cu[B]) return;
  const int h = blockIdx.y, b = sequence_of(cu, B, t);
  const int first = cu[b], len = cu[b + 1] - first, i = static_cast<int>(t - first);
  const Cols c = cols_of(heads, d, h);
  float* qv = sm;
  float* pm = sm + d;
  for (int k = threadIdx.x; k < d; k += blockDim.x) qv[k] = load(qkv, e, t * c.stride + c.q + k);
  __syncthreads();
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < len; j += blockDim.x) {
    const int64_t row = (first + j) * c.stride + c.k;
    float s = 0.0f;
    for (int k = 0; k < d; ++k) s += qv[k] * load(qkv, e, row + k);
    s = s * scale + bias(rel, i, j, h, heads, max_seqlen);
    pm[j] = s;
    mx = fmaxf(mx, s);
  }
  mx = block_max(mx, scratch);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < len; j += blockDim.x) {
    const float p = expf(pm[j] - mx);
    sum += p;
    pm[j] = p * mask_factor(dr, t, h, heads, j);
  }
  sum = block_sum(sum, scratch);  // its barriers also publish pm
  const int64_t out_row = t * int64_t{heads} * d + c.q;
  for (int k = threadIdx.x; k < d; k += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < len; ++j) acc += pm[j] * load(qkv, e, (first + j) * c.stride + c.v + k);
    store(out, e, out_row + k, acc / sum);
  }
  if (threadIdx.x == 0) lse[t * heads + h] = mx + logf(sum);
}

// D_i = dout_i · out_i, by the whole block.
__device__ float row_dot(const void* dout, Elem dout_e, const void* out, Elem out_e, int64_t base, int d,
                         float* scratch) {
  float acc = 0.0f;
  for (int k = threadIdx.x; k < d; k += blockDim.x) acc += load(dout, dout_e, base + k) * load(out, out_e, base + k);
  return block_sum(acc, scratch);
}

// What every backward kernel reads, in one argument.
struct Backward {
  void* dqkv;
  Elem dq_e;
  const void* dout;
  Elem dout_e;
  const void* qkv;
  Elem e;
  const void* out;
  Elem out_e;
  const float* lse;
  const int32_t* cu;
  int B, heads, d, max_seqlen;
  const float* rel;
  float scale;
  Dropout dr;
};

// dQ_i = sum_j dS_ij k_j / sqrt(d), dS_ij = P_ij (m_ij (dout_i · v_j) - D_i); token t is query i.
__global__ void relpos_dq_kernel(Backward a) {
  extern __shared__ float sm[];  // q (d), dout (d), dS (len)
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  if (t >= a.cu[a.B]) return;
  const int h = blockIdx.y, b = sequence_of(a.cu, a.B, t);
  const int first = a.cu[b], len = a.cu[b + 1] - first, i = static_cast<int>(t - first);
  const int d = a.d;
  const Cols c = cols_of(a.heads, d, h);
  const int64_t o_row = t * int64_t{a.heads} * d + c.q;
  float* qv = sm;
  float* gv = sm + d;
  float* ds = sm + 2 * d;
  for (int k = threadIdx.x; k < d; k += blockDim.x) {
    qv[k] = load(a.qkv, a.e, t * c.stride + c.q + k);
    gv[k] = load(a.dout, a.dout_e, o_row + k);
  }
  const float Di = row_dot(a.dout, a.dout_e, a.out, a.out_e, o_row, d, scratch);  // its barriers publish qv, gv
  const float l = a.lse[t * a.heads + h];
  for (int j = threadIdx.x; j < len; j += blockDim.x) {
    const int64_t row = (first + j) * c.stride;
    float s = 0.0f, dp = 0.0f;
    for (int k = 0; k < d; ++k) {
      s += qv[k] * load(a.qkv, a.e, row + c.k + k);
      dp += gv[k] * load(a.qkv, a.e, row + c.v + k);
    }
    const float p = expf(s * a.scale + bias(a.rel, i, j, h, a.heads, a.max_seqlen) - l);
    ds[j] = p * (dp * mask_factor(a.dr, t, h, a.heads, j) - Di);
  }
  __syncthreads();
  for (int k = threadIdx.x; k < d; k += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < len; ++j) acc += ds[j] * load(a.qkv, a.e, (first + j) * c.stride + c.k + k);
    store(a.dqkv, a.dq_e, t * c.stride + c.q + k, acc * a.scale);
  }
}

// dK_j = sum_i dS_ij q_i / sqrt(d), dV_j = sum_i P_ij m_ij dout_i; token t is key j.
__global__ void relpos_dkv_kernel(Backward a) {
  extern __shared__ float sm[];  // k (d), v (d), dS (len), P m (len)
  const int64_t t = blockIdx.x;
  if (t >= a.cu[a.B]) return;
  const int h = blockIdx.y, b = sequence_of(a.cu, a.B, t);
  const int first = a.cu[b], len = a.cu[b + 1] - first, j = static_cast<int>(t - first);
  const int d = a.d;
  const Cols c = cols_of(a.heads, d, h);
  const int64_t D = int64_t{a.heads} * d;
  float* kv = sm;
  float* vv = sm + d;
  float* ds = sm + 2 * d;
  float* pm = ds + len;
  for (int k = threadIdx.x; k < d; k += blockDim.x) {
    kv[k] = load(a.qkv, a.e, t * c.stride + c.k + k);
    vv[k] = load(a.qkv, a.e, t * c.stride + c.v + k);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < len; i += blockDim.x) {
    const int64_t ti = first + i;
    float s = 0.0f, dp = 0.0f, Di = 0.0f;
    for (int k = 0; k < d; ++k) {
      const float g = load(a.dout, a.dout_e, ti * D + c.q + k);
      s += load(a.qkv, a.e, ti * c.stride + c.q + k) * kv[k];
      dp += g * vv[k];
      Di += g * load(a.out, a.out_e, ti * D + c.q + k);
    }
    const float p = expf(s * a.scale + bias(a.rel, i, j, h, a.heads, a.max_seqlen) - a.lse[ti * a.heads + h]);
    const float m = mask_factor(a.dr, ti, h, a.heads, j);
    ds[i] = p * (dp * m - Di);
    pm[i] = p * m;
  }
  __syncthreads();
  for (int k = threadIdx.x; k < d; k += blockDim.x) {
    float dk = 0.0f, dv = 0.0f;
    for (int i = 0; i < len; ++i) {
      const int64_t ti = first + i;
      dk += ds[i] * load(a.qkv, a.e, ti * c.stride + c.q + k);
      dv += pm[i] * load(a.dout, a.dout_e, ti * D + c.q + k);
    }
    store(a.dqkv, a.dq_e, t * c.stride + c.k + k, dk * a.scale);
    store(a.dqkv, a.dq_e, t * c.stride + c.v + k, dv);
  }
}

// drel[r, h] = sum over every sequence and query i of dS_ij with j = i + r - (max_seqlen - 1);
// written (0 where no pair is that far apart). Block (r, h); T packed tokens.
__global__ void relpos_drel_kernel(Backward a, float* drel, int64_t T) {
  __shared__ float scratch[32];
  const int r = blockIdx.x, h = blockIdx.y;
  const int delta = r - (a.max_seqlen - 1);
  const int d = a.d;
  const Cols c = cols_of(a.heads, d, h);
  const int64_t D = int64_t{a.heads} * d;
  const float bias_r = a.rel[int64_t{r} * a.heads + h];
  float acc = 0.0f;
  for (int64_t t = threadIdx.x; t < T; t += blockDim.x) {
    if (t >= a.cu[a.B]) break;  // rows past the last sequence (none with a packed batch)
    const int b = sequence_of(a.cu, a.B, t);
    const int first = a.cu[b], len = a.cu[b + 1] - first;
    const int i = static_cast<int>(t - first), j = i + delta;
    if (j < 0 || j >= len) continue;
    const int64_t tj = first + j;
    float s = 0.0f, dp = 0.0f, Di = 0.0f;
    for (int k = 0; k < d; ++k) {
      const float g = load(a.dout, a.dout_e, t * D + c.q + k);
      s += load(a.qkv, a.e, t * c.stride + c.q + k) * load(a.qkv, a.e, tj * c.stride + c.k + k);
      dp += g * load(a.qkv, a.e, tj * c.stride + c.v + k);
      Di += g * load(a.out, a.out_e, t * D + c.q + k);
    }
    const float p = expf(s * a.scale + bias_r - a.lse[t * a.heads + h]);
    acc += p * (dp * mask_factor(a.dr, t, h, a.heads, j) - Di);
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) drel[int64_t{r} * a.heads + h] = acc;
}

}  // namespace

void launch_attention_relpos_train(cudaStream_t s, const TensorView& out, const TensorView& lse,
                                   const TensorView& qkv, const TensorView& cu_seqlens, int heads, int max_seqlen,
                                   const TensorView& rel, const Ops::AttentionDropout& dropout) {
  const int64_t B = cu_seqlens.dim(0) - 1, T = qkv.dim(0);
  if (B == 0 || T == 0 || max_seqlen == 0) return;
  const int d = static_cast<int>(qkv.dim(1) / (3 * int64_t{heads}));
  const size_t smem = (static_cast<size_t>(d) + static_cast<size_t>(max_seqlen)) * 4;
  if (smem > 46 * 1024 || heads > 65535 || T > INT32_MAX / 2)
    throw Error(Errc::unsupported, "cuda attention_relpos_train: sequences up to ~11,000 tokens, at most 65535 heads");
  relpos_train_kernel<<<dim3(static_cast<unsigned>(T), static_cast<unsigned>(heads)), kThreads, smem, s>>>(
      out.data, lse.as<float>(), qkv.data, elem_of(qkv.dtype), cu_seqlens.as<const int32_t>(), static_cast<int>(B),
      heads, d, max_seqlen, rel.as<const float>(), 1.0f / sqrtf(static_cast<float>(d)), dropout_of(dropout));
  check_launch("relpos_train_kernel");
}

void launch_attention_relpos_backward(cudaStream_t s, const TensorView& dqkv, const TensorView& drel,
                                      const TensorView& dout, const TensorView& qkv, const TensorView& out,
                                      const TensorView& lse, const TensorView& cu_seqlens, int heads, int max_seqlen,
                                      const TensorView& rel, const Ops::AttentionDropout& dropout) {
  const int64_t B = cu_seqlens.dim(0) - 1, T = qkv.dim(0);
  if (B == 0 || T == 0 || max_seqlen == 0) {  // no pair of tokens: nothing flows back
    if (dqkv.bytes()) check_cuda(cudaMemsetAsync(dqkv.data, 0, dqkv.bytes(), s), "cudaMemsetAsync");
    if (drel.bytes()) check_cuda(cudaMemsetAsync(drel.data, 0, drel.bytes(), s), "cudaMemsetAsync");
    return;
  }
  const int d = static_cast<int>(qkv.dim(1) / (3 * int64_t{heads}));
  const size_t smem = (2 * static_cast<size_t>(d) + 2 * static_cast<size_t>(max_seqlen)) * 4;
  if (smem > 46 * 1024 || heads > 65535 || T > INT32_MAX / 2 || 2 * int64_t{max_seqlen} - 1 > INT32_MAX)
    throw Error(Errc::unsupported, "cuda attention_relpos_backward: sequences up to ~5,000 tokens, at most 65535 heads");
  const Backward a{dqkv.data,  elem_of(dqkv.dtype),     dout.data,  elem_of(dout.dtype),
                   qkv.data,   elem_of(qkv.dtype),      out.data,   elem_of(out.dtype),
                   lse.as<const float>(), cu_seqlens.as<const int32_t>(), static_cast<int>(B), heads, d, max_seqlen,
                   rel.as<const float>(), 1.0f / sqrtf(static_cast<float>(d)), dropout_of(dropout)};
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>(heads));
  relpos_dq_kernel<<<grid, kThreads, smem, s>>>(a);
  check_launch("relpos_dq_kernel");
  relpos_dkv_kernel<<<grid, kThreads, smem, s>>>(a);
  check_launch("relpos_dkv_kernel");
  relpos_drel_kernel<<<dim3(static_cast<unsigned>(2 * max_seqlen - 1), static_cast<unsigned>(heads)), kThreads, 0, s>>>(
      a, drel.as<float>(), T);
  check_launch("relpos_drel_kernel");
}

}  // namespace stoke::cuda
