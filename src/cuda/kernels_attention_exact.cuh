// The exact attention kernels (f32 arithmetic, any dtype, any head dim),
// shared by plain attention (kernels_attention.cu: a sliding window or none)
// and MPNet's relative-position attention (kernels_attention_relpos.cu: a
// per-head bias on every score). The training forward and the backward are
// here, templated on how a scaled product q_i·k_j / sqrt(d) becomes a score
// — the `Scores` policy (the flash kernels, kernels_attention_flash_train.cu,
// take the same policies); the inference forward, launch_simt, is
// kernels_attention.cu's (declared below). Also here: the dropout key and its
// mask factor (the CPU's Philox element index, so both backends drop the very
// same probabilities; mask_factors4 draws four keys from one Philox block),
// the sequence of a packed token, a head's qkv columns.
//
// Every block is one (packed token, head): the forward and dQ take the token
// as the query, dK and dV as the key; each output element is one thread's
// sum in a fixed order, so the backward is deterministic (no atomics) — at
// the price of recomputing the scores once per pass and O(len) shared memory
// per row. This path serves f32, head dims > 128 and other dtype mixes; bf16
// and f16 with head dim <= 128 (gradients in that dtype or f32) take the
// flash kernels. Device code: only .cu files include this header.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/ops.h"
#include "core/error.h"
#include "core/philox.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_common.cuh"

namespace stoke::cuda::attention_exact {

struct Dropout {
  float p, scale;
  uint64_t seed;
  uint32_t step, tensor_id;
  uint64_t row_offset;
  const uint32_t* device_step;  // set: the step is read here when the kernel runs (graph replays)
};

inline Dropout dropout_of(const Ops::AttentionDropout& d) {
  // the dropout op's f32 factor
  return {d.p,          d.p < 1.0f ? 1.0f / (1.0f - d.p) : 0.0f, d.seed, d.step.value, d.tensor_id,
          d.row_offset, d.step.device.as<const uint32_t>()};
}

// The index layout of Ops::AttentionDropout::row_index (a host function):
// ((row_offset + t) * heads + h) << kKeyBits, plus the key j.
__device__ __forceinline__ float mask_factor(const Dropout& dr, int64_t t, int h, int heads, int j) {
  if (dr.p == 0.0f) return 1.0f;
  const uint64_t row = (dr.row_offset + static_cast<uint64_t>(t)) * static_cast<uint64_t>(heads) + static_cast<uint64_t>(h);
  const uint64_t index = (row << Ops::AttentionDropout::kKeyBits) + static_cast<uint64_t>(j);
  const uint32_t step = dr.device_step ? *dr.device_step : dr.step;
  return philox::element_uniform(dr.seed, step, dr.tensor_id, index) >= dr.p ? dr.scale : 0.0f;
}

// mask_factor of keys j0 .. j0 + 3 (j0 a multiple of 4) into m[4]: the four
// words of one Philox block (element index row << 32 | j, block = index / 4),
// the very factors mask_factor draws one call each (the tiled kernels).
__device__ __forceinline__ void mask_factors4(const Dropout& dr, int64_t t, int h, int heads, int j0, float m[4]) {
  if (dr.p == 0.0f) {
    m[0] = m[1] = m[2] = m[3] = 1.0f;
    return;
  }
  const uint64_t row = (dr.row_offset + static_cast<uint64_t>(t)) * static_cast<uint64_t>(heads) + static_cast<uint64_t>(h);
  const uint64_t index = (row << Ops::AttentionDropout::kKeyBits) + static_cast<uint64_t>(j0);
  const uint32_t step = dr.device_step ? *dr.device_step : dr.step;
  uint32_t w[4];
  philox::block_bits(dr.seed, step, dr.tensor_id, index >> 2, w);
#pragma unroll
  for (int k = 0; k < 4; ++k) m[k] = philox::uniform(w[k]) >= dr.p ? dr.scale : 0.0f;
}

// The dropout with a device-side step read once (a block's first act),
// so the per-element draws do not each read it from memory.
__device__ __forceinline__ Dropout with_step_read(Dropout dr) {
  if (dr.device_step) {
    dr.step = *dr.device_step;
    dr.device_step = nullptr;
  }
  return dr;
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

struct Cols {
  int64_t stride, q, k, v;  // qkv row width; this head's q, k, v columns
};
__device__ __forceinline__ Cols cols_of(int heads, int d, int h) {
  const int64_t q = int64_t{h} * d;
  return {int64_t{3} * heads * d, q, int64_t{heads} * d + q, int64_t{2} * heads * d + q};
}

constexpr int kThreads = 128;

// Plain attention: the scaled product is the score; with a sliding window
// (window > 0) query i sees only keys j with |i - j| <= window, and P_ij is
// exactly 0 for the others (the loops still run over the sequence: this is
// the correctness path).
struct WindowScores {
  int window;
  __device__ __forceinline__ bool sees(int i, int j) const { return window == 0 || abs(i - j) <= window; }
  __device__ __forceinline__ float score(float scaled, int, int, int) const { return scaled; }
  __device__ __forceinline__ int reach() const { return window; }  // 0: the whole sequence
};

// MPNet: every query sees its whole sequence, and the score of query i and key
// j (positions in their sequence), head h, carries the bias
// rel[(j - i) + max_seqlen - 1, h].
struct RelposScores {
  const float* rel;
  int heads, max_seqlen;
  __device__ __forceinline__ bool sees(int, int) const { return true; }
  __device__ __forceinline__ int reach() const { return 0; }  // the whole sequence
  __device__ __forceinline__ float bias(int i, int j, int h) const {
    return rel[(int64_t{j} - i + max_seqlen - 1) * heads + h];
  }
  __device__ __forceinline__ float score(float scaled, int i, int j, int h) const { return scaled + bias(i, j, h); }
};

// out_i = sum_j P_ij m_ij v_j, lse_i = log sum_j exp(s_ij) (undropped).
template <class Scores>
__global__ void forward_kernel(void* out, float* lse, const void* qkv, Elem e, const int32_t* cu, int B, int heads,
                               int d, float scale, Scores sc, Dropout dr) {
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
    if (!sc.sees(i, j)) {
      pm[j] = -INFINITY;  // exp: exactly 0
      continue;
    }
    const int64_t row = (first + j) * c.stride + c.k;
    float s = 0.0f;
    for (int k = 0; k < d; ++k) s += qv[k] * load(qkv, e, row + k);
    s = sc.score(s * scale, i, j, h);
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
    // Blocks of 16 keys in f32 added into a double, as the inference kernel
    // (kernels_attention.cu: a run of one token's near-equal terms).
    double total = 0.0;
    for (int j0 = 0; j0 < len; j0 += 16) {
      float acc = 0.0f;
      for (int j = j0; j < min(len, j0 + 16); ++j) acc += pm[j] * load(qkv, e, (first + j) * c.stride + c.v + k);
      total += static_cast<double>(acc);
    }
    store(out, e, out_row + k, static_cast<float>(total / static_cast<double>(sum)));
  }
  if (threadIdx.x == 0) lse[t * heads + h] = mx + logf(sum);
}

// D_i = dout_i · out_i, by the whole block.
__device__ inline float row_dot(const void* dout, Elem dout_e, const void* out, Elem out_e, int64_t base, int d,
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
  int B, heads, d;
  float scale;
  Dropout dr;
};

// dQ_i = sum_j dS_ij k_j / sqrt(d), dS_ij = P_ij (m_ij (dout_i · v_j) - D_i); token t is query i.
template <class Scores>
__global__ void dq_kernel(Backward a, Scores sc) {
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
    const float p = sc.sees(i, j) ? expf(sc.score(s * a.scale, i, j, h) - l) : 0.0f;
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
template <class Scores>
__global__ void dkv_kernel(Backward a, Scores sc) {
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
    const float p = sc.sees(i, j) ? expf(sc.score(s * a.scale, i, j, h) - a.lse[ti * a.heads + h]) : 0.0f;
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

inline int head_dim_of(const TensorView& qkv, int heads) { return static_cast<int>(qkv.dim(1) / (3 * int64_t{heads})); }

// The forward over a packed batch (B, T > 0, max_seqlen > 0); `op` names it
// in the refusal of sequences whose row does not fit shared memory.
template <class Scores>
void launch_forward(cudaStream_t s, const char* op, const TensorView& out, const TensorView& lse, const TensorView& qkv,
                    const TensorView& cu_seqlens, int heads, int max_seqlen, Scores sc,
                    const Ops::AttentionDropout& dropout) {
  const int64_t B = cu_seqlens.dim(0) - 1, T = qkv.dim(0);
  const int d = head_dim_of(qkv, heads);
  const size_t smem = (static_cast<size_t>(d) + static_cast<size_t>(max_seqlen)) * 4;
  if (smem > 46 * 1024 || heads > 65535 || T > INT32_MAX / 2)
    throw Error(Errc::unsupported, std::string("cuda ") + op + ": sequences up to ~11,000 tokens, at most 65535 heads");
  forward_kernel<Scores><<<dim3(static_cast<unsigned>(T), static_cast<unsigned>(heads)), kThreads, smem, s>>>(
      out.data, lse.as<float>(), qkv.data, elem_of(qkv.dtype), cu_seqlens.as<const int32_t>(), static_cast<int>(B),
      heads, d, 1.0f / sqrtf(static_cast<float>(d)), sc, dropout_of(dropout));
  check_launch("attention forward_kernel");
}

// The backward's arguments, as they are.
inline Backward backward_of(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv,
                            const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens, int heads,
                            const Ops::AttentionDropout& dropout) {
  const int64_t B = cu_seqlens.dim(0) - 1;
  const int d = head_dim_of(qkv, heads);
  return {dqkv.data, elem_of(dqkv.dtype), dout.data, elem_of(dout.dtype), qkv.data, elem_of(qkv.dtype), out.data,
          elem_of(out.dtype), lse.as<const float>(), cu_seqlens.as<const int32_t>(), static_cast<int>(B), heads, d,
          1.0f / sqrtf(static_cast<float>(d)), dropout_of(dropout)};
}

// The exact backward's arguments, after the refusal of rows that do not fit
// its O(len) shared memory (the flash kernels have no such limit).
inline Backward backward_args(const char* op, const TensorView& dqkv, const TensorView& dout, const TensorView& qkv,
                              const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens, int heads,
                              int max_seqlen, const Ops::AttentionDropout& dropout) {
  const int64_t T = qkv.dim(0);
  const int d = head_dim_of(qkv, heads);
  const size_t smem = (2 * static_cast<size_t>(d) + 2 * static_cast<size_t>(max_seqlen)) * 4;
  if (smem > 46 * 1024 || heads > 65535 || T > INT32_MAX / 2 || 2 * int64_t{max_seqlen} - 1 > INT32_MAX)
    throw Error(Errc::unsupported, std::string("cuda ") + op +
                                       ": sequences up to ~5,000 tokens, at most 65535 heads (f32 or head dim > 128; "
                                       "bf16/f16 with head dim <= 128 take the flash kernels, without this limit)");
  return backward_of(dqkv, dout, qkv, out, lse, cu_seqlens, heads, dropout);
}

// dQ, then dK and dV, of a packed batch (B, T > 0, max_seqlen > 0).
template <class Scores>
void launch_backward(cudaStream_t s, const Backward& a, int64_t T, int max_seqlen, Scores sc) {
  const size_t smem = (2 * static_cast<size_t>(a.d) + 2 * static_cast<size_t>(max_seqlen)) * 4;
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>(a.heads));
  dq_kernel<Scores><<<grid, kThreads, smem, s>>>(a, sc);
  check_launch("attention dq_kernel");
  dkv_kernel<Scores><<<grid, kThreads, smem, s>>>(a, sc);
  check_launch("attention dkv_kernel");
}

// The exact inference forward (kernels_attention.cu): one block per (packed
// query token, head), f32 throughout. rel (may be null): MPNet's bias
// rel[(j - q) + max_seqlen - 1][h]; keys (may be null): only each sequence's
// first keys[b] tokens are keys (attention_keys); window: only keys
// |j - q| <= window (0: all).
void launch_simt(cudaStream_t s, const TensorView& out, const TensorView& qkv, const int32_t* cu, const int32_t* keys,
                 int heads, int d, int max_seqlen, int64_t B, const float* rel, int window);

}  // namespace stoke::cuda::attention_exact
