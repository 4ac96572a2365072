// Attention for training, the exact path (f32 arithmetic, any dtype, any
// head dim): the forward that also writes lse and applies dropout to the
// probabilities, and the backward, as src/cpu/ref/ref_attention.cc defines
// them (its header has the formulas). Dropout: the mask element of query row
// t (packed), head h, key j is Philox's uniform at flat index
// ((row_offset + t) * heads + h) * 2^32 + j (Ops::AttentionDropout,
// core/philox.h), so the CPU and the GPU drop the very same probabilities.
//
// Every block is one (packed token, head): the forward and dQ take the token
// as the query, dK and dV as the key; each output element is one thread's
// sum in a fixed order, so the backward is deterministic (no atomics) — at
// the price of recomputing the scores once per pass. A sliding window
// (window > 0) makes P_ij exactly 0 for |i - j| > window (the loops still
// run over the sequence: this is the correctness path). This is the
// correctness-first kernel the op table checks; a flash-style backward on
// the tensor cores is the speed step after it.
#include <cmath>

#include "core/error.h"
#include "core/philox.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_common.cuh"
#include "cuda/kernels_train.h"

namespace stoke::cuda {

namespace {

constexpr int kThreads = 128;

struct Dropout {
  float p, scale;
  uint64_t seed;
  uint32_t step, tensor_id;
  uint64_t row_offset;
  const uint32_t* device_step;  // set: the step is read here when the kernel runs (graph replays)
};

// The index layout of Ops::AttentionDropout::row_index (a host function):
// ((row_offset + t) * heads + h) << kKeyBits, plus the key j.
__device__ __forceinline__ float mask_factor(const Dropout& dr, int64_t t, int h, int heads, int j) {
  if (dr.p == 0.0f) return 1.0f;
  const uint64_t row = (dr.row_offset + static_cast<uint64_t>(t)) * static_cast<uint64_t>(heads) + static_cast<uint64_t>(h);
  const uint64_t index = (row << Ops::AttentionDropout::kKeyBits) + static_cast<uint64_t>(j);
  const uint32_t step = dr.device_step ? *dr.device_step : dr.step;
  return philox::element_uniform(dr.seed, step, dr.tensor_id, index) >= dr.p ? dr.scale : 0.0f;
}

// The sequence holding packed token t: the largest b with cu[b] <= t.
__device__ __forceinline__ int sequence_of(const int32_t* cu, int B, int64_t t) {
  int lo = 0, hi = B - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (cu[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// Whether query i sees key j (positions in the sequence) under the window.
__device__ __forceinline__ bool sees(int i, int j, int window) { return window == 0 || abs(i - j) <= window; }

struct Cols {
  int64_t stride, q, k, v;  // qkv row width; this head's q, k, v columns
};
__device__ __forceinline__ Cols cols_of(int heads, int d, int h) {
  const int64_t q = int64_t{h} * d;
  return {int64_t{3} * heads * d, q, int64_t{heads} * d + q, int64_t{2} * heads * d + q};
}

// out_i = sum_j P_ij m_ij v_j, lse_i = log sum_j exp(s_ij) (undropped).
__global__ void attention_train_kernel(void* out, float* lse, const void* qkv, Elem e, const int32_t* cu, int B,
                                       int heads, int d, int max_seqlen, int window, float scale, Dropout dr) {
  extern __shared__ float sm[];  // q (d), then the row's probabilities times the mask (len)
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  if (t >= cu[B]) return;
  const int h = blockIdx.y, b = sequence_of(cu, B, t);
  const int first = cu[b], len = cu[b + 1] - first;
  const Cols c = cols_of(heads, d, h);
  float* qv = sm;
  float* pm = sm + d;
  for (int k = threadIdx.x; k < d; k += blockDim.x) qv[k] = load(qkv, e, t * c.stride + c.q + k);
  __syncthreads();
  float mx = -INFINITY;
  const int i = static_cast<int>(t - first);
  for (int j = threadIdx.x; j < len; j += blockDim.x) {
    if (!sees(i, j, window)) {
      pm[j] = -INFINITY;  // exp: exactly 0
      continue;
    }
    const int64_t row = (first + j) * c.stride + c.k;
    float s = 0.0f;
    for (int k = 0; k < d; ++k) s += qv[k] * load(qkv, e, row + k);
    s *= scale;
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

// dQ_i = sum_j dS_ij k_j / sqrt(d), dS_ij = P_ij (m_ij (dout_i · v_j) - D_i); token t is query i.
__global__ void attention_dq_kernel(void* dqkv, Elem dq_e, const void* dout, Elem dout_e, const void* qkv, Elem e,
                                    const void* out, Elem out_e, const float* lse, const int32_t* cu, int B,
                                    int heads, int d, int max_seqlen, int window, float scale, Dropout dr) {
  extern __shared__ float sm[];  // q (d), dout (d), dS (len)
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  if (t >= cu[B]) return;
  const int h = blockIdx.y, b = sequence_of(cu, B, t);
  const int first = cu[b], len = cu[b + 1] - first;
  const Cols c = cols_of(heads, d, h);
  const int64_t o_row = t * int64_t{heads} * d + c.q;
  float* qv = sm;
  float* gv = sm + d;
  float* ds = sm + 2 * d;
  for (int k = threadIdx.x; k < d; k += blockDim.x) {
    qv[k] = load(qkv, e, t * c.stride + c.q + k);
    gv[k] = load(dout, dout_e, o_row + k);
  }
  const float Di = row_dot(dout, dout_e, out, out_e, o_row, d, scratch);  // its barriers publish qv, gv
  const float l = lse[t * heads + h];
  for (int j = threadIdx.x; j < len; j += blockDim.x) {
    const int64_t row = (first + j) * c.stride;
    float s = 0.0f, dp = 0.0f;
    for (int k = 0; k < d; ++k) {
      s += qv[k] * load(qkv, e, row + c.k + k);
      dp += gv[k] * load(qkv, e, row + c.v + k);
    }
    const float p = sees(static_cast<int>(t - first), j, window) ? expf(s * scale - l) : 0.0f;
    ds[j] = p * (dp * mask_factor(dr, t, h, heads, j) - Di);
  }
  __syncthreads();
  for (int k = threadIdx.x; k < d; k += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < len; ++j) acc += ds[j] * load(qkv, e, (first + j) * c.stride + c.k + k);
    store(dqkv, dq_e, t * c.stride + c.q + k, acc * scale);
  }
}

// dK_j = sum_i dS_ij q_i / sqrt(d), dV_j = sum_i P_ij m_ij dout_i; token t is key j.
__global__ void attention_dkv_kernel(void* dqkv, Elem dq_e, const void* dout, Elem dout_e, const void* qkv, Elem e,
                                     const void* out, Elem out_e, const float* lse, const int32_t* cu, int B,
                                     int heads, int d, int max_seqlen, int window, float scale, Dropout dr) {
  extern __shared__ float sm[];  // k (d), v (d), dS (len), P m (len)
  const int64_t t = blockIdx.x;
  if (t >= cu[B]) return;
  const int h = blockIdx.y, b = sequence_of(cu, B, t);
  const int first = cu[b], len = cu[b + 1] - first, j = static_cast<int>(t - first);
  const Cols c = cols_of(heads, d, h);
  const int64_t D = int64_t{heads} * d;
  float* kv = sm;
  float* vv = sm + d;
  float* ds = sm + 2 * d;
  float* pm = ds + len;
  for (int k = threadIdx.x; k < d; k += blockDim.x) {
    kv[k] = load(qkv, e, t * c.stride + c.k + k);
    vv[k] = load(qkv, e, t * c.stride + c.v + k);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < len; i += blockDim.x) {
    const int64_t ti = first + i;
    float s = 0.0f, dp = 0.0f, Di = 0.0f;
    for (int k = 0; k < d; ++k) {
      const float g = load(dout, dout_e, ti * D + c.q + k);
      s += load(qkv, e, ti * c.stride + c.q + k) * kv[k];
      dp += g * vv[k];
      Di += g * load(out, out_e, ti * D + c.q + k);
    }
    const float p = sees(i, j, window) ? expf(s * scale - lse[ti * heads + h]) : 0.0f;
    const float m = mask_factor(dr, ti, h, heads, j);
    ds[i] = p * (dp * m - Di);
    pm[i] = p * m;
  }
  __syncthreads();
  for (int k = threadIdx.x; k < d; k += blockDim.x) {
    float dk = 0.0f, dv = 0.0f;
    for (int i = 0; i < len; ++i) {
      const int64_t ti = first + i;
      dk += ds[i] * load(qkv, e, ti * c.stride + c.q + k);
      dv += pm[i] * load(dout, dout_e, ti * D + c.q + k);
    }
    store(dqkv, dq_e, t * c.stride + c.k + k, dk * scale);
    store(dqkv, dq_e, t * c.stride + c.v + k, dv);
  }
}

Dropout dropout_of(const Ops::AttentionDropout& d) {
  // the dropout op's f32 factor
  return {d.p,          d.p < 1.0f ? 1.0f / (1.0f - d.p) : 0.0f, d.seed, d.step.value, d.tensor_id,
          d.row_offset, d.step.device.as<const uint32_t>()};
}

}  // namespace

void launch_attention_train(cudaStream_t s, const TensorView& out, const TensorView& lse, const TensorView& qkv,
                            const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                            const Ops::AttentionDropout& dropout) {
  const int64_t B = cu_seqlens.dim(0) - 1, T = qkv.dim(0);
  if (B == 0 || T == 0 || max_seqlen == 0) return;
  const int d = static_cast<int>(qkv.dim(1) / (3 * int64_t{heads}));
  const size_t smem = (static_cast<size_t>(d) + static_cast<size_t>(max_seqlen)) * 4;
  if (smem > 46 * 1024 || heads > 65535 || T > INT32_MAX / 2)
    throw Error(Errc::unsupported, "cuda attention_train: sequences up to ~11,000 tokens, at most 65535 heads");
  attention_train_kernel<<<dim3(static_cast<unsigned>(T), static_cast<unsigned>(heads)), kThreads, smem, s>>>(
      out.data, lse.as<float>(), qkv.data, elem_of(qkv.dtype), cu_seqlens.as<const int32_t>(), static_cast<int>(B),
      heads, d, max_seqlen, window, 1.0f / sqrtf(static_cast<float>(d)), dropout_of(dropout));
  check_launch("attention_train_kernel");
}

void launch_attention_backward(cudaStream_t s, const TensorView& dqkv, const TensorView& dout, const TensorView& qkv,
                               const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens, int heads,
                               int max_seqlen, int window, const Ops::AttentionDropout& dropout) {
  const int64_t B = cu_seqlens.dim(0) - 1, T = qkv.dim(0);
  if (T == 0) return;
  const int d = static_cast<int>(qkv.dim(1) / (3 * int64_t{heads}));
  if (B == 0 || max_seqlen == 0) {  // no sequence holds a token: nothing flows back
    check_cuda(cudaMemsetAsync(dqkv.data, 0, dqkv.bytes(), s), "cudaMemsetAsync");
    return;
  }
  const size_t smem = (2 * static_cast<size_t>(d) + 2 * static_cast<size_t>(max_seqlen)) * 4;
  if (smem > 46 * 1024 || heads > 65535 || T > INT32_MAX / 2)
    throw Error(Errc::unsupported, "cuda attention_backward: sequences up to ~5,000 tokens, at most 65535 heads");
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>(heads));
  const float scale = 1.0f / sqrtf(static_cast<float>(d));
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  const Dropout dr = dropout_of(dropout);
  attention_dq_kernel<<<grid, kThreads, smem, s>>>(dqkv.data, elem_of(dqkv.dtype), dout.data, elem_of(dout.dtype),
                                                   qkv.data, elem_of(qkv.dtype), out.data, elem_of(out.dtype),
                                                   lse.as<const float>(), cu, static_cast<int>(B), heads, d,
                                                   max_seqlen, window, scale, dr);
  check_launch("attention_dq_kernel");
  attention_dkv_kernel<<<grid, kThreads, smem, s>>>(dqkv.data, elem_of(dqkv.dtype), dout.data, elem_of(dout.dtype),
                                                    qkv.data, elem_of(qkv.dtype), out.data, elem_of(out.dtype),
                                                    lse.as<const float>(), cu, static_cast<int>(B), heads, d,
                                                    max_seqlen, window, scale, dr);
  check_launch("attention_dkv_kernel");
}

}  // namespace stoke::cuda
