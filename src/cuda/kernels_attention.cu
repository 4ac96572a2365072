// Variable-length multi-head attention over packed tokens, no work on padding:
// plain attention whole — attention and attention_keys (inference; their
// kernels are here), attention_train and attention_backward (their launchers
// here, after the inference ones). MPNet's relative-position forms are
// kernels_attention_relpos.cu's.
//
// Fast path (bf16/f16, head dim <= 128): flash-attention style. A block of 4
// warps takes 64 query rows of one (sequence, head) and walks the sequence's
// keys in tiles of 64: S = Q K^T and P V on the tensor cores (WMMA 16x16x16,
// f32 accumulation), the softmax online in f32 (running max and sum per row,
// the output rescaled as the max grows), so no T x T matrix ever exists. The
// head dim is padded with zeros to 16/32/64/128 in shared memory — zeros add
// nothing to the dot products — so any d up to 128 takes it (the fixtures'
// d = 16 too). Probabilities are rounded to the activation dtype for P V, as
// flash-attention does; the sum that normalises them is kept in f32.
//
// attention_keys: a sequence's first keys[b] tokens alone are keys (every
// token still a query): both paths stop their key walk there.
//
// A sliding window w > 0 (local attention: query i sees keys |i - j| <= w)
// narrows both paths to the keys in reach: the flash kernel walks only the key
// tiles its 64 rows can see (masking the rest of each tile), the exact path
// only the row's own 2w + 1 keys. A local layer costs O(T w), not O(T L).
//
// Correct path (f32, d > 128, or MPNet's relative-position bias): one block
// per (query row, head, sequence); scores in shared memory, exact softmax, f32
// throughout.
//
// Grid: a flattened work list, y the heads. The flash kernel's x walks the
// (sequence, 64-row query block) pairs: sequence b owns the slots from
// floor(cu[b] / 64) + b, at least ceil(len_b / 64) of them and at most one
// more, so a block finds its pair from cu_seqlens alone (a binary search),
// with no host read and no scratch list — graph capture safe — and at most
// one block per sequence exits at once (a grid of ceil(max_seqlen / 64)
// blocks per sequence wasted most blocks on a real length mix). The exact
// path's x walks the T packed tokens: one block per real query row.
//
// Training: the forward that also writes lse and applies dropout to the
// probabilities, and the backward, as src/cpu/ref/ref_attention.cc defines
// them (its header has the formulas), with a sliding window or none. Their
// kernels are MPNet's too, with another score, so they live in files of
// their own: bf16/f16 with head dim <= 128 take the flash kernels on the
// tensor cores (kernels_attention_flash_train.cu: O(tile) shared memory, any
// length); f32, larger head dims and other dtype mixes take the exact kernels
// (kernels_attention_exact.cuh: O(len) shared memory per row, up to ~5,000
// tokens in the backward). Dropout: the mask element of query row t (packed),
// head h, key j is Philox's uniform at flat index
// ((row_offset + t) * heads + h) * 2^32 + j (Ops::AttentionDropout,
// core/philox.h), so the CPU and the GPU drop the very same probabilities.
#include <mma.h>

#include "cuda/kernels.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_attention_exact.cuh"
#include "cuda/kernels_attention_flash_train.h"
#include "cuda/kernels_common.cuh"
#include "cuda/kernels_flash_common.cuh"

namespace stoke::cuda {

namespace {

using namespace flash;

// Shared memory per block: Q, K and V tiles (16-bit) and one f32 row of
// scores per query row (kLdS) — nothing else: the output, the running max
// and sum and the rescale factors live in registers, and a warp's
// probabilities are written over its own score rows (kernels_flash_common.cuh
// has the layout). At d = 64 a block needs 45 KiB (4 blocks per SM on an
// H200, as registers allow) where it once needed 71 KiB (3 blocks) for the
// separate P, O and statistics tiles; d = 128 needs 69 KiB (2 blocks, as
// registers allow; once 126 KiB, 1).
template <int DP>
constexpr size_t flash_smem_bytes() {
  return size_t{2} * (kBr * flash_ld<DP>() + 2 * kBc * flash_ld<DP>())  // Q, K, V (16-bit)
         + size_t{4} * kBr * kLdS;                                      // S, then P and a P·V tile
}

template <class T, int DP>
__global__ void __launch_bounds__(kWarps * 32, min_blocks<DP>())
    flash_attention_kernel(T* out, const T* qkv, const int32_t* cu, const int32_t* keys, int B, int heads, int d,
                           int window, float scale_log2) {
  constexpr int LD = flash_ld<DP>(), SW = kLdS, kTiles = DP / 16;
  extern __shared__ __align__(128) unsigned char smem[];
  T* q_s = reinterpret_cast<T*>(smem);                       // [kBr][LD]
  T* k_s = q_s + kBr * LD;                                   // [kBc][LD]
  T* v_s = k_s + kBc * LD;                                   // [kBc][LD]
  float* s_s = reinterpret_cast<float*>(v_s + kBc * LD);     // [kBr][SW] scores; then P (16-bit) and P·V

  const int64_t slot = blockIdx.x;
  const int b = last_at_or_below(B, slot, [cu](int i) { return first_slot(cu, i); });
  const int h = blockIdx.y;
  const int first = cu[b], len = cu[b + 1] - first;
  const int nk = keys ? keys[b] : len;  // the sequence's keys: its first nk tokens (attention_keys)
  const int64_t q0_wide = (slot - first_slot(cu, b)) * kBr;
  if (q0_wide >= len) return;  // block-uniform, before any barrier
  const int q0 = static_cast<int>(q0_wide);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t stride = int64_t{3} * heads * d;
  const int64_t q_col = int64_t{h} * d, k_col = int64_t{heads} * d + q_col, v_col = int64_t{2} * heads * d + q_col;
  const bool vec = d % 8 == 0 && (reinterpret_cast<uintptr_t>(qkv) & 15) == 0;  // block-uniform
  float* s_w = s_s + warp * 16 * SW;                   // this warp's 16 score rows
  T* p_w = reinterpret_cast<T*>(s_w);                  // its probabilities, 16-bit, leading dimension 2 SW

  load_tile<T, DP, LD>(q_s, qkv, first + q0, kBr, len - q0, stride, q_col, d, vec);
  // The running max (log2 units), sum and last rescale of this warp's 16
  // rows: every lane holds the same values (the warp reductions hand each
  // lane the result). The output: kernels_flash_common.cuh.
  float m_run[16], l_run[16], alpha[16];
  float o[kTiles][8];
  start_rows<DP>(m_run, l_run, o);

  // The key tiles any of the block's rows sees: all of them without a window.
  const int k_first = window ? max(0, q0 - window) / kBc * kBc : 0;
  const int k_end = window ? min(nk, q0 + kBr + window) : nk;
  for (int k0 = k_first; k0 < k_end; k0 += kBc) {
    // K and V of the tile by cp.async, V landing while S and the softmax are computed.
    __syncthreads();  // the previous tile's K and V are no longer read (and Q is loaded)
    load_tile_async<T, DP, LD>(k_s, qkv, first + k0, kBc, nk - k0, stride, k_col, d, vec);
    __pipeline_commit();
    load_tile_async<T, DP, LD>(v_s, qkv, first + k0, kBc, nk - k0, stride, v_col, d, vec);
    __pipeline_commit();
    __pipeline_wait_prior(1);  // this thread's K copies have landed
    __syncthreads();           // and every thread's

    warp_scores<T, DP>(s_w, q_s + warp * 16 * LD, k_s);  // S = Q K^T for this warp's 16 rows

    // Online softmax over the tile, a warp per row: lanes take keys lane and
    // lane + 32; the row's probabilities are written over its scores.
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const float* srow = s_w + r * SW;
      const int qi = q0 + warp * 16 + r, j0 = k0 + lane, j1 = k0 + lane + 32;
      const bool see0 = j0 < nk && (window == 0 || abs(qi - j0) <= window);
      const bool see1 = j1 < nk && (window == 0 || abs(qi - j1) <= window);
      const float x0 = see0 ? srow[lane] * scale_log2 : -INFINITY;
      const float x1 = see1 ? srow[lane + 32] * scale_log2 : -INFINITY;
      const float m_old = m_run[r];
      // -inf only while the row has seen no key yet (a window's tile before
      // the row's reach, or a padding row): then p = 0 and alpha = 0.
      const float m_new = fmaxf(m_old, warp_max(fmaxf(x0, x1)));
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float p0 = exp2f(x0 - m_use), p1 = exp2f(x1 - m_use);
      const float sum = warp_sum(p0 + p1);
      alpha[r] = exp2f(m_old - m_use);  // 0 on the row's first seen tile (m_old = -inf)
      l_run[r] = l_run[r] * alpha[r] + sum;
      m_run[r] = m_new;
      __syncwarp();  // every lane has read the row's scores before any overwrites them
      T* prow = p_w + r * 2 * SW;
      prow[lane] = from_float<T>(p0);
      prow[lane + 32] = from_float<T>(p1);
    }
    __pipeline_wait_prior(0);  // V
    __syncthreads();

    accumulate_pv<T, DP>(o, s_w, v_s, [&](int u) { return of_my_row(alpha, lane, u); });
  }

  const int row0 = q0 + warp * 16;
  store_output<T, DP>(o, l_run, out, int64_t{first} + row0, len - row0, int64_t{heads} * d, q_col, d);
}

// rel (may be null): MPNet's relative-position bias, rel[(j - q) + max_seqlen - 1][h],
// added to every scaled score.
// window: only keys |j - q| <= window (0: all of them).
// keys (may be null): only the sequence's first keys[b] tokens are keys (attention_keys).
__global__ void simt_attention_kernel(void* out, const void* qkv, Elem e, const int32_t* cu, const int32_t* keys,
                                      int heads, int d, float scale, const float* rel, int max_seqlen, int B,
                                      int window) {
  extern __shared__ float sm[];  // q (d floats), then the row's scores (len floats)
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;  // this block's packed token
  if (t >= cu[B]) return;
  const int b = last_at_or_below(B, t, [cu](int i) { return static_cast<int64_t>(cu[i]); });
  const int h = blockIdx.y;
  const int first = cu[b], len = cu[b + 1] - first, q = static_cast<int>(t - first);
  float* qv = sm;
  float* sc = sm + d;
  const int64_t stride = int64_t{3} * heads * d;
  const int64_t q_col = int64_t{h} * d, k_col = int64_t{heads} * d + q_col, v_col = int64_t{2} * heads * d + q_col;
  for (int c = threadIdx.x; c < d; c += blockDim.x) qv[c] = load(qkv, e, (first + q) * stride + q_col + c) * scale;
  __syncthreads();
  const int nk = keys ? keys[b] : len;
  const int lo = window ? max(0, q - window) : 0, hi = window ? min(nk, q + window + 1) : nk;
  float mx = -INFINITY;
  for (int j = lo + static_cast<int>(threadIdx.x); j < hi; j += blockDim.x) {
    const int64_t row = (first + j) * stride + k_col;
    float s = 0.0f;
    for (int c = 0; c < d; ++c) s += qv[c] * load(qkv, e, row + c);
    if (rel) s += rel[(int64_t{j} - q + max_seqlen - 1) * heads + h];
    sc[j] = s;
    mx = fmaxf(mx, s);
  }
  mx = block_max(mx, scratch);
  float sum = 0.0f;
  for (int j = lo + static_cast<int>(threadIdx.x); j < hi; j += blockDim.x) {
    const float p = expf(sc[j] - mx);
    sc[j] = p;
    sum += p;
  }
  sum = block_sum(sum, scratch);  // its barriers also publish sc
  // P V over blocks of kKeyBlock keys in f32, each block's sum added into a
  // double: a run of one token gives a row hundreds of near-equal weights
  // and values, whose serial f32 sum's roundings line up instead of
  // cancelling (as on the CPU: src/cpu/fast/fast_attention_relpos.cc).
  constexpr int kKeyBlock = 16;
  const int64_t out_row = (first + q) * int64_t{heads} * d + q_col;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    double total = 0.0;
    for (int j0 = lo; j0 < hi; j0 += kKeyBlock) {
      float acc = 0.0f;
      for (int j = j0; j < min(hi, j0 + kKeyBlock); ++j) acc += sc[j] * load(qkv, e, (first + j) * stride + v_col + c);
      total += static_cast<double>(acc);
    }
    store(out, e, out_row + c, static_cast<float>(total / static_cast<double>(sum)));
  }
}

// The largest padded head dim whose flash kernel fits the GPU's shared
// memory (set by attention_setup; larger head dims take the exact path).
// d = 128 needs 69 KiB: Hopper, A100 and sm_86/89 (99 KiB) have it.
int g_flash_max_dp = 0;

// Static shared memory beside the dynamic part (block reductions' scratch).
constexpr size_t kStaticSmem = 128;

template <class T, int DP>
bool set_flash_smem(int optin_limit) {
  if (flash_smem_bytes<DP>() + kStaticSmem > static_cast<size_t>(optin_limit)) return false;
  check_cuda(cudaFuncSetAttribute(flash_attention_kernel<T, DP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(flash_smem_bytes<DP>())),
             "cudaFuncSetAttribute (attention)");
  return true;
}

template <class T>
int set_flash_smem_all(int optin_limit) {
  int dp = 0;
  if (set_flash_smem<T, 16>(optin_limit)) dp = 16;
  if (set_flash_smem<T, 32>(optin_limit)) dp = 32;
  if (set_flash_smem<T, 64>(optin_limit)) dp = 64;
  if (set_flash_smem<T, 128>(optin_limit)) dp = 128;
  return dp;
}

template <class T>
void launch_flash(cudaStream_t s, void* out, const void* qkv, const int32_t* cu, const int32_t* keys, int B, int heads,
                  int d, int window, dim3 grid) {
  const float scale_log2 = 1.4426950408889634f / sqrtf(static_cast<float>(d));
  auto go = [&](auto kernel, size_t smem) {
    kernel<<<grid, kWarps * 32, smem, s>>>(static_cast<T*>(out), static_cast<const T*>(qkv), cu, keys, B, heads, d,
                                           window, scale_log2);
  };
  if (d <= 16)
    go(flash_attention_kernel<T, 16>, flash_smem_bytes<16>());
  else if (d <= 32)
    go(flash_attention_kernel<T, 32>, flash_smem_bytes<32>());
  else if (d <= 64)
    go(flash_attention_kernel<T, 64>, flash_smem_bytes<64>());
  else
    go(flash_attention_kernel<T, 128>, flash_smem_bytes<128>());
  check_launch("flash_attention_kernel");
}

}  // namespace

namespace attention_exact {

// The exact path: one block per (packed query token, head).
void launch_simt(cudaStream_t s, const TensorView& out, const TensorView& qkv, const int32_t* cu, const int32_t* keys,
                 int heads, int d, int max_seqlen, int64_t B, const float* rel, int window) {
  const size_t smem = (static_cast<size_t>(d) + static_cast<size_t>(max_seqlen)) * 4;
  if (smem + kStaticSmem > 48 * 1024)
    throw Error(Errc::unsupported, "cuda attention: f32, head dim > 128 or a relative-position bias supports "
                                   "sequences up to ~12,000 tokens");
  const dim3 grid(static_cast<unsigned>(qkv.dim(0)), static_cast<unsigned>(heads));
  simt_attention_kernel<<<grid, 128, smem, s>>>(out.data, qkv.data, elem_of(qkv.dtype), cu, keys, heads, d,
                                                1.0f / sqrtf(static_cast<float>(d)), rel, max_seqlen,
                                                static_cast<int>(B), window);
  check_launch("simt_attention_kernel");
}

}  // namespace attention_exact

void attention_setup() {
  int device = 0, optin = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
  set_flash_smem_all<__nv_bfloat16>(optin);
  g_flash_max_dp = set_flash_smem_all<__half>(optin);
}

void launch_attention(cudaStream_t s, const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens,
                      int heads, int max_seqlen, int window) {
  launch_attention_keys(s, out, qkv, cu_seqlens, TensorView{}, heads, max_seqlen, window);
}

void launch_attention_keys(cudaStream_t s, const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens,
                           const TensorView& key_lens, int heads, int max_seqlen, int window) {
  const int32_t* keys = key_lens.empty() ? nullptr : key_lens.as<const int32_t>();
  const int64_t B = cu_seqlens.dim(0) - 1;
  if (B == 0 || max_seqlen == 0 || qkv.dim(0) == 0) return;
  if (heads > 65535 || B > INT32_MAX / 2 || qkv.dim(0) > INT32_MAX / 2)
    throw Error(Errc::unsupported, "cuda attention: at most 65535 heads and 2^30 tokens per call");
  const int d = static_cast<int>(qkv.dim(1) / (3 * int64_t{heads}));
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  if ((qkv.dtype == DType::bf16 || qkv.dtype == DType::f16) && d <= g_flash_max_dp) {
    // Slots of the work list: sum over b of (floor(cu[b+1]/64) - floor(cu[b]/64) + 1) <= T / 64 + B.
    const int64_t slots = qkv.dim(0) / kBr + B;
    const dim3 grid(static_cast<unsigned>(slots), static_cast<unsigned>(heads));
    const int nb = static_cast<int>(B);
    if (qkv.dtype == DType::bf16)
      launch_flash<__nv_bfloat16>(s, out.data, qkv.data, cu, keys, nb, heads, d, window, grid);
    else
      launch_flash<__half>(s, out.data, qkv.data, cu, keys, nb, heads, d, window, grid);
    return;
  }
  attention_exact::launch_simt(s, out, qkv, cu, keys, heads, d, max_seqlen, B, nullptr, window);
}

// ---- attention_train, attention_backward (their kernels: the header's "Training")

using namespace attention_exact;  // the exact kernels' launchers and types

void launch_attention_train(cudaStream_t s, const TensorView& out, const TensorView& lse, const TensorView& qkv,
                            const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                            const Ops::AttentionDropout& dropout) {
  if (cu_seqlens.dim(0) <= 1 || qkv.dim(0) == 0 || max_seqlen == 0) return;
  if (flash_train_takes(qkv, out, heads)) {
    launch_flash_attention_train(s, out, lse, qkv, cu_seqlens, heads, window, nullptr, max_seqlen, dropout);
    return;
  }
  launch_forward(s, "attention_train", out, lse, qkv, cu_seqlens, heads, max_seqlen, WindowScores{window}, dropout);
}

void launch_attention_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dqkv, const TensorView& dout,
                               const TensorView& qkv, const TensorView& out, const TensorView& lse,
                               const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                               const Ops::AttentionDropout& dropout) {
  const int64_t T = qkv.dim(0);
  if (T == 0) return;
  if (cu_seqlens.dim(0) <= 1 || max_seqlen == 0) {  // no sequence holds a token: nothing flows back
    check_cuda(cudaMemsetAsync(dqkv.data, 0, dqkv.bytes(), s), "cudaMemsetAsync");
    return;
  }
  if (flash_train_takes(qkv, out, heads, {&dout, &dqkv})) {
    launch_flash_attention_backward(s, dqkv, dout, qkv, out, lse, cu_seqlens, heads, window, nullptr, max_seqlen,
                                    dropout, scratch);
    return;
  }
  const Backward a =
      backward_args("attention_backward", dqkv, dout, qkv, out, lse, cu_seqlens, heads, max_seqlen, dropout);
  launch_backward(s, a, T, max_seqlen, WindowScores{window});
}

}  // namespace stoke::cuda
