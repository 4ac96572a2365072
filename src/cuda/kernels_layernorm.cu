// The LayerNorm family: embed_layernorm and residual_layernorm, their
// training forms (embed_layernorm_train, residual_layernorm_train: the same
// row, mean and rstd kept) and layernorm_backward, side by side
// (embed_layernorm_backward, with its scatter into the tables:
// kernels_embedding_backward.cu).
//
// Forward: the row is summed first, then
// normalised with two-pass statistics (mean, then the biased variance
// around it: no cancellation), so out may alias x or residual (every element
// is read and written by the same thread). The row, its statistics and
// (s - mean) rstd gamma + beta are in double up to the one rounding of the
// output, as on the CPU (src/cpu/fast/fast_layernorm.cc): f32 inputs add
// exactly there, and a trained encoder's rows can have means in the hundreds
// and spreads of hundredths, where an f32 sum and an f32 mean are each off
// by up to half an ulp of the mean — a shift of every centred value that the
// normalisation divides by the spread (2e-3 relative at mean 300, spread
// 0.01; tests/ops "activations of trained models"). The op waits on memory;
// the double arithmetic is far inside sm_90's FP64 rate. H <= 1024 (every
// BERT-family width up to large): one warp per row, the row in registers (at
// most 32 values a lane), warp shuffles for the sums: no shared memory, no
// block barriers, four rows per block. Wider rows: one block per row, the
// row in shared memory. The two sum in different orders: results agree
// within a rounding, not bit for bit.
//
// Backward determinism: no atomics. dgamma and dbeta are
// kernels_column_reduce.cuh's fixed chunks summed in a fixed order: the same
// bits on every run. Arithmetic is in f32, so the results match the CPU
// reference to the op table's tolerance, not bit for bit.
#include "cuda/kernels.h"
#include "cuda/cuda_internal.h"
#include "cuda/kernels_column_reduce.cuh"
#include "cuda/kernels_common.cuh"
#include "cuda/kernels_embedding.cuh"

namespace stoke::cuda {

namespace {

constexpr int kThreads = 256;

struct LnParams {
  const void* gamma;
  const void* beta;
  Elem gamma_e, beta_e;
  float eps;
  int64_t H;
};

// Where a row goes: out, and the optional second copy (the next GEMM's input).
struct LnOut {
  void* out;
  Elem out_e;
  void* low;  // nullptr: none
  Elem low_e;
};

// Normalises row[0:H) (shared memory, double) and stores it at row t of out
// (and of the second copy, converted from out's value as stored: what
// convert writes).
__device__ void normalize_and_store(const double* row, double* scratch, const LnParams& p, const LnOut& o,
                                    int64_t t) {
  const int64_t H = p.H;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) s += row[i];
  const double mean = block_sum(s, scratch) / static_cast<double>(H);
  double v = 0.0;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    const double d = row[i] - mean;
    v += d * d;
  }
  const double var = block_sum(v, scratch) / static_cast<double>(H);
  const double rstd = 1.0 / sqrt(var + static_cast<double>(p.eps));
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    const float y =
        static_cast<float>((row[i] - mean) * rstd * load(p.gamma, p.gamma_e, i) + load(p.beta, p.beta_e, i));
    store(o.out, o.out_e, t * H + i, y);
    if (o.low) store(o.low, o.low_e, t * H + i, rounded(o.out_e, y));
  }
}

__global__ void embed_layernorm_kernel(LnOut o, const int32_t* ids, const int32_t* positions,
                                       const int32_t* type_ids, const void* word, Elem word_e, const void* pos,
                                       Elem pos_e, const void* type, Elem type_e, LnParams p) {
  extern __shared__ double row_wide[];  // H doubles
  __shared__ double scratch[32];
  double* row = row_wide;
  const int64_t t = blockIdx.x, H = p.H;
  const int64_t wi = ids[t], pi = positions[t], ti = type_ids ? type_ids[t] : 0;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    double v = static_cast<double>(load(word, word_e, wi * H + i)) + static_cast<double>(load(pos, pos_e, pi * H + i));
    if (type) v += static_cast<double>(load(type, type_e, ti * H + i));
    row[i] = v;
  }
  __syncthreads();
  normalize_and_store(row, scratch, p, o, t);
}

// residual may be null: LayerNorm of x alone (x holds the sum already).
__global__ void residual_layernorm_kernel(LnOut o, const void* x, const void* residual, Elem in_e, LnParams p) {
  extern __shared__ double row_wide[];  // H doubles
  __shared__ double scratch[32];
  double* row = row_wide;
  const int64_t t = blockIdx.x, H = p.H;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
    double v = static_cast<double>(load(x, in_e, t * H + i));
    if (residual) v += static_cast<double>(load(residual, in_e, t * H + i));
    row[i] = v;
  }
  __syncthreads();  // the whole row is read before any of it is written (aliasing)
  normalize_and_store(row, scratch, p, o, t);
}

// ---- one warp per row (H <= 32 * N)
constexpr int kWarpRows = 4;  // rows (warps) per block

// Normalises the row lane `lane` holds at columns lane + 32 k (k < N; zeros
// past H) and stores it at row t, as normalize_and_store.
template <int N>
__device__ __forceinline__ void warp_normalize_and_store(const double (&v)[N], const LnParams& p, const LnOut& o,
                                                         int64_t t, int lane) {
  const int64_t H = p.H;
  double s = 0.0;
#pragma unroll
  for (int k = 0; k < N; ++k) s += v[k];  // zeros past H
  const double mean = warp_sum(s) / static_cast<double>(H);
  double q = 0.0;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const double d = lane + 32 * k < H ? v[k] - mean : 0.0;
    q += d * d;
  }
  const double rstd = 1.0 / sqrt(warp_sum(q) / static_cast<double>(H) + static_cast<double>(p.eps));
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + 32 * k;
    if (i < H) {
      const float y =
          static_cast<float>((v[k] - mean) * rstd * load(p.gamma, p.gamma_e, i) + load(p.beta, p.beta_e, i));
      store(o.out, o.out_e, t * H + i, y);
      if (o.low) store(o.low, o.low_e, t * H + i, rounded(o.out_e, y));
    }
  }
}

template <int N>
__global__ void embed_layernorm_warp_kernel(LnOut o, const int32_t* ids, const int32_t* positions,
                                            const int32_t* type_ids, const void* word, Elem word_e, const void* pos,
                                            Elem pos_e, const void* type, Elem type_e, LnParams p, int64_t T) {
  const int lane = threadIdx.x & 31;
  const int64_t t = int64_t{blockIdx.x} * kWarpRows + (threadIdx.x >> 5), H = p.H;
  if (t >= T) return;  // a whole warp: no shuffle is left half-empty
  const int64_t wi = ids[t], pi = positions[t], ti = type_ids ? type_ids[t] : 0;
  double v[N];
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + 32 * k;
    double x = 0.0;
    if (i < H) {
      x = static_cast<double>(load(word, word_e, wi * H + i)) + static_cast<double>(load(pos, pos_e, pi * H + i));
      if (type) x += static_cast<double>(load(type, type_e, ti * H + i));
    }
    v[k] = x;
  }
  warp_normalize_and_store<N>(v, p, o, t, lane);
}

template <int N>
__global__ void residual_layernorm_warp_kernel(LnOut o, const void* x, const void* residual, Elem in_e, LnParams p,
                                               int64_t T) {
  const int lane = threadIdx.x & 31;
  const int64_t t = int64_t{blockIdx.x} * kWarpRows + (threadIdx.x >> 5), H = p.H;
  if (t >= T) return;
  double v[N];
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + 32 * k;
    double s = 0.0;
    if (i < H) {
      s = static_cast<double>(load(x, in_e, t * H + i));
      if (residual) s += static_cast<double>(load(residual, in_e, t * H + i));  // null: x alone
    }
    v[k] = s;
  }
  warp_normalize_and_store<N>(v, p, o, t, lane);
}

// Values per lane for a warp row of H columns: 4, 8, 16 or 32; 0 = too wide.
int warp_values(int64_t H) {
  for (int n : {4, 8, 16, 32})
    if (H <= 32 * n) return n;
  return 0;
}

unsigned warp_row_blocks(int64_t T) { return static_cast<unsigned>((T + kWarpRows - 1) / kWarpRows); }

LnOut ln_out(const TensorView& out, const TensorView& out_low) {
  return LnOut{out.data, elem_of(out.dtype), out_low.empty() ? nullptr : out_low.data, elem_of(out_low.dtype)};
}

LnParams ln_params(const TensorView& gamma, const TensorView& beta, float eps, int64_t H) {
  return LnParams{gamma.data, beta.data, elem_of(gamma.dtype), elem_of(beta.dtype), eps, H};
}

void check_row_width(int64_t H) {
  // One row of doubles in shared memory beside the 256-byte reduction
  // scratch, within the 48 KiB a block gets without opting in: 6,112 columns.
  constexpr int64_t kMaxH = (48 * 1024 - 256) / 8;
  if (H > kMaxH)
    throw Error(Errc::unsupported, "cuda layernorm: hidden size " + std::to_string(H) + " over " + std::to_string(kMaxH));
}

// ---- the training forwards and the backward

// The two training forwards' common end, once the block has its row s in
// shared memory (double) and its threads' partial sums: two-pass mean and
// biased variance, the output until its rounding in double, mean and rstd
// stored rounded to f32.
__device__ __forceinline__ void normalize_saved_row(const double* row, double sum, double* scratch, void* out,
                                                    Elem out_e, float* mean, float* rstd, const void* gamma,
                                                    Elem gamma_e, const void* beta, Elem beta_e, int64_t t, int64_t H,
                                                    float eps) {
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
  normalize_saved_row(row, sum, scratch, out, out_e, mean, rstd, gamma, gamma_e, beta, beta_e, t, H, eps);
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
template <int N>
__global__ void residual_layernorm_train_warp_kernel(void* out, Elem out_e, float* mean, float* rstd, const void* x,
                                                     Elem x_e, const void* res, Elem res_e, const void* gamma,
                                                     Elem gamma_e, const void* beta, Elem beta_e, int64_t T, int64_t H,
                                                     float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t t = int64_t{blockIdx.x} * kWarpRows + (threadIdx.x >> 5);
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
  const int64_t t = int64_t{blockIdx.x} * kWarpRows + (threadIdx.x >> 5);
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
  normalize_saved_row(row, sum, scratch, out, out_e, mean, rstd, gamma, gamma_e, beta, beta_e, t, H, eps);
}

}  // namespace

void launch_embed_layernorm(cudaStream_t s, const TensorView& out, const TensorView& ids, const TensorView& positions,
                            const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                            const TensorView& type, const TensorView& gamma, const TensorView& beta, float eps,
                            const TensorView& out_low) {
  const int64_t T = out.dim(0), H = out.dim(1);
  if (T == 0 || H == 0) return;
  const LnOut o = ln_out(out, out_low);
  const LnParams p = ln_params(gamma, beta, eps, H);
  const int32_t* type_rows = type_ids.empty() ? nullptr : type_ids.as<const int32_t>();
  const void* type_table = type.empty() ? nullptr : type.data;
  switch (warp_values(H)) {
#define STOKE_EMBED_LN_WARP(N)                                                                                      \
  case N:                                                                                                            \
    embed_layernorm_warp_kernel<N><<<warp_row_blocks(T), 32 * kWarpRows, 0, s>>>(                                  \
        o, ids.as<const int32_t>(), positions.as<const int32_t>(), type_rows, word.data, elem_of(word.dtype),        \
        pos.data, elem_of(pos.dtype), type_table, elem_of(type.dtype), p, T);                                        \
    check_launch("embed_layernorm_warp_kernel");                                                                     \
    return;
    STOKE_EMBED_LN_WARP(4)
    STOKE_EMBED_LN_WARP(8)
    STOKE_EMBED_LN_WARP(16)
    STOKE_EMBED_LN_WARP(32)
#undef STOKE_EMBED_LN_WARP
    default: break;
  }
  check_row_width(H);
  embed_layernorm_kernel<<<static_cast<unsigned>(T), kThreads, static_cast<size_t>(H) * 8, s>>>(
      ln_out(out, out_low), ids.as<const int32_t>(), positions.as<const int32_t>(),
      type_ids.empty() ? nullptr : type_ids.as<const int32_t>(), word.data, elem_of(word.dtype), pos.data,
      elem_of(pos.dtype), type.empty() ? nullptr : type.data, elem_of(type.dtype), ln_params(gamma, beta, eps, H));
  check_launch("embed_layernorm_kernel");
}

void launch_residual_layernorm(cudaStream_t s, const TensorView& out, const TensorView& x, const TensorView& residual,
                               const TensorView& gamma, const TensorView& beta, float eps, const TensorView& out_low) {
  const int64_t T = out.dim(0), H = out.dim(1);
  if (T == 0 || H == 0) return;
  const LnOut o = ln_out(out, out_low);
  const LnParams p = ln_params(gamma, beta, eps, H);
  switch (warp_values(H)) {
#define STOKE_RESIDUAL_LN_WARP(N)                                                                                  \
  case N:                                                                                                           \
    residual_layernorm_warp_kernel<N><<<warp_row_blocks(T), 32 * kWarpRows, 0, s>>>(o, x.data, residual.data,     \
                                                                                    elem_of(x.dtype), p, T);        \
    check_launch("residual_layernorm_warp_kernel");                                                                 \
    return;
    STOKE_RESIDUAL_LN_WARP(4)
    STOKE_RESIDUAL_LN_WARP(8)
    STOKE_RESIDUAL_LN_WARP(16)
    STOKE_RESIDUAL_LN_WARP(32)
#undef STOKE_RESIDUAL_LN_WARP
    default: break;
  }
  check_row_width(H);
  residual_layernorm_kernel<<<static_cast<unsigned>(T), kThreads, static_cast<size_t>(H) * 8, s>>>(
      ln_out(out, out_low), x.data, residual.data, elem_of(x.dtype), ln_params(gamma, beta, eps, H));
  check_launch("residual_layernorm_kernel");
}

void launch_residual_layernorm_train(cudaStream_t s, const TensorView& out, const TensorView& mean,
                                     const TensorView& rstd, const TensorView& x, const TensorView& residual,
                                     const TensorView& gamma, const TensorView& beta, float eps) {
  const int64_t T = x.dim(0), H = x.dim(1);
  if (T == 0 || H == 0) return;
  switch (warp_values(H)) {
#define STOKE_LN_TRAIN_WARP(N)                                                                                      \
  case N:                                                                                                            \
    residual_layernorm_train_warp_kernel<N><<<warp_row_blocks(T), 32 * kWarpRows, 0, s>>>(                        \
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
  switch (warp_values(H)) {
#define STOKE_LN_DX_WARP(N)                                                                                         \
  case N:                                                                                                            \
    layernorm_dx_warp_kernel<N><<<warp_row_blocks(T), 32 * kWarpRows, 0, s>>>(                                    \
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
