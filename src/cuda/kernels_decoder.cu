// The decoder ops (Qwen2, Qwen3) on CUDA: residual_rmsnorm (a block per
// token row), head_rmsnorm (a warp per token and head) and grouped-query
// attention_gqa on an exact path: a block per (query row, head), the keys
// walked in chunks of one key per thread with the softmax kept online (f32
// running max and sum, the output rescaled as the max grows), so shared
// memory holds the query, the output row and one chunk of probabilities —
// any context length fits. Correct first; a tensor-core path like the flash
// kernel's is the next step for speed.
#include <string>

#include "core/error.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels.h"
#include "cuda/kernels_common.cuh"

namespace stoke::cuda {

namespace {

constexpr int kRowThreads = 256;
constexpr int kKeyChunk = 128;  // keys per chunk = threads per attention block

__global__ void residual_rmsnorm_kernel(void* h, Elem h_e, void* out, Elem out_e, const void* x, Elem x_e,
                                        const void* gamma, Elem g_e, float eps, int64_t H) {
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  float ss = 0.0f;
  // Each thread reads and writes only its own columns, so out may be h.
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    float v = load(h, h_e, t * H + i);
    if (x) {
      v = rounded(h_e, v + load(x, x_e, t * H + i));  // as stored: the norm reads the rounded residual
      store(h, h_e, t * H + i, v);
    }
    ss += v * v;
  }
  const float r = rsqrtf(block_sum(ss, scratch) / static_cast<float>(H) + eps);
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    const float v = x ? rounded(h_e, load(h, h_e, t * H + i)) : load(h, h_e, t * H + i);
    store(out, out_e, t * H + i, v * r * load(gamma, g_e, i));
  }
}

__global__ void head_rmsnorm_kernel(void* qkv, Elem e, const void* q_gamma, Elem qg_e, const void* k_gamma,
                                    Elem kg_e, int heads, int d, int64_t C, float eps) {
  const int64_t t = blockIdx.x;
  const int h = blockIdx.y;
  const int64_t at = t * C + int64_t{h} * d;
  const void* gamma = h < heads ? q_gamma : k_gamma;
  const Elem g_e = h < heads ? qg_e : kg_e;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < d; c += 32) {
    const float v = load(qkv, e, at + c);
    ss += v * v;
  }
  const float r = rsqrtf(warp_sum(ss) / static_cast<float>(d) + eps);
  for (int c = threadIdx.x; c < d; c += 32) store(qkv, e, at + c, load(qkv, e, at + c) * r * load(gamma, g_e, c));
}

__global__ void __launch_bounds__(kKeyChunk)
    gqa_attention_kernel(void* out, const void* qkv, Elem e, const int32_t* cu, int B, int heads, int kv_heads,
                         int d, bool causal, float scale) {
  extern __shared__ float sm[];  // q [d], o [d], p [kKeyChunk]
  __shared__ float scratch[32];
  float* q_s = sm;
  float* o_s = sm + d;
  float* p_s = sm + 2 * d;
  const int64_t t = blockIdx.x;
  const int h = blockIdx.y;
  int lo = 0, hi = B - 1;  // the sequence holding row t: the last b with cu[b] <= t
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (cu[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int64_t first = cu[lo], len = cu[lo + 1] - first, i = t - first;
  const int g = h / (heads / kv_heads);
  const int64_t C = int64_t{heads + 2 * kv_heads} * d;
  if (i >= len) {  // a graph bucket's padding row, in no sequence: zeros (block-uniform, before any barrier)
    for (int c = threadIdx.x; c < d; c += blockDim.x) store(out, e, t * heads * d + int64_t{h} * d + c, 0.0f);
    return;
  }
  const int64_t q_col = int64_t{h} * d, k_col = int64_t{heads + g} * d, v_col = int64_t{heads + kv_heads + g} * d;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    q_s[c] = load(qkv, e, t * C + q_col + c) * scale;
    o_s[c] = 0.0f;
  }
  __syncthreads();
  const int64_t keys = causal ? i + 1 : len;
  float m = -INFINITY, l = 0.0f;  // the same in every thread (block reductions)
  for (int64_t k0 = 0; k0 < keys; k0 += blockDim.x) {
    const int64_t j = k0 + threadIdx.x;
    float s = -INFINITY;
    if (j < keys) {
      s = 0.0f;
      for (int c = 0; c < d; ++c) s += q_s[c] * load(qkv, e, (first + j) * C + k_col + c);
    }
    const float m_new = fmaxf(m, block_max(s, scratch));
    const float p = j < keys ? expf(s - m_new) : 0.0f;
    p_s[threadIdx.x] = p;
    const float sum = block_sum(p, scratch);  // (its barriers also publish p_s)
    const float alpha = expf(m - m_new);      // 0 on the first chunk (m = -inf)
    l = l * alpha + sum;
    const int64_t n = keys - k0 < blockDim.x ? keys - k0 : blockDim.x;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {  // o_s[c] is this thread's own
      float acc = o_s[c] * alpha;
      for (int64_t jj = 0; jj < n; ++jj) acc += p_s[jj] * load(qkv, e, (first + k0 + jj) * C + v_col + c);
      o_s[c] = acc;
    }
    m = m_new;
    __syncthreads();  // p_s is read before the next chunk writes it
  }
  for (int c = threadIdx.x; c < d; c += blockDim.x) store(out, e, t * heads * d + int64_t{h} * d + c, o_s[c] / l);
}

}  // namespace

void launch_residual_rmsnorm(cudaStream_t s, const TensorView& h, const TensorView& out, const TensorView& x,
                             const TensorView& gamma, float eps) {
  const int64_t T = h.dim(0), H = h.dim(1);
  if (T == 0 || H == 0) return;
  if (T > INT32_MAX) throw Error(Errc::unsupported, "cuda residual_rmsnorm: at most 2^31 - 1 rows per call");
  residual_rmsnorm_kernel<<<static_cast<unsigned>(T), kRowThreads, 0, s>>>(
      h.data, elem_of(h.dtype), out.data, elem_of(out.dtype), x.empty() ? nullptr : x.data, elem_of(x.dtype),
      gamma.data, elem_of(gamma.dtype), eps, H);
  check_launch("residual_rmsnorm_kernel");
}

void launch_head_rmsnorm(cudaStream_t s, const TensorView& qkv, const TensorView& q_gamma, const TensorView& k_gamma,
                         int heads, int kv_heads, float eps) {
  const int64_t T = qkv.dim(0), C = qkv.dim(1);
  if (T == 0 || C == 0) return;
  if (T > INT32_MAX || heads + kv_heads > 65535)
    throw Error(Errc::unsupported, "cuda head_rmsnorm: at most 2^31 - 1 rows and 65535 q + k heads per call");
  const int d = static_cast<int>(C / (heads + 2 * int64_t{kv_heads}));
  head_rmsnorm_kernel<<<dim3(static_cast<unsigned>(T), static_cast<unsigned>(heads + kv_heads)), 32, 0, s>>>(
      qkv.data, elem_of(qkv.dtype), q_gamma.data, elem_of(q_gamma.dtype), k_gamma.data, elem_of(k_gamma.dtype), heads,
      d, C, eps);
  check_launch("head_rmsnorm_kernel");
}

void launch_attention_gqa(cudaStream_t s, const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens,
                          int heads, int kv_heads, bool causal) {
  const int64_t T = qkv.dim(0), B = cu_seqlens.dim(0) - 1;
  if (T == 0 || B == 0) return;
  if (T > INT32_MAX || heads > 65535)
    throw Error(Errc::unsupported, "cuda attention_gqa: at most 2^31 - 1 tokens and 65535 heads per call");
  const int d = static_cast<int>(qkv.dim(1) / (heads + 2 * int64_t{kv_heads}));
  const size_t smem = (2 * static_cast<size_t>(d) + kKeyChunk) * 4;
  if (smem + 128 > 48 * 1024)
    throw Error(Errc::unsupported, "cuda attention_gqa: head dim " + std::to_string(d) + " over 6000");
  gqa_attention_kernel<<<dim3(static_cast<unsigned>(T), static_cast<unsigned>(heads)), kKeyChunk, smem, s>>>(
      out.data, qkv.data, elem_of(qkv.dtype), cu_seqlens.as<const int32_t>(), static_cast<int>(B), heads, kv_heads, d,
      causal, static_cast<float>(1.0 / sqrt(static_cast<double>(d))));
  check_launch("gqa_attention_kernel");
}

}  // namespace stoke::cuda
