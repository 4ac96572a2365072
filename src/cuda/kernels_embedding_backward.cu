// embed_layernorm_backward on the GPU: the embedding LayerNorm's gamma and
// beta gradients and the scatter of ds into the word, position and type
// tables (contract: backend/op_list.h), deterministic without atomics.
//
// ds[t, c] = rstd_t (dy[t,c] gamma_c - mean_c'(g) - x_hat[t,c] mean_c'(g x_hat)),
// g = dy gamma, x_hat = (s - mean_t) rstd_t, s = the token's embedding sum.
//
// 1. A warp per token: the two means of its row (token_means_kernel).
// 2. dgamma, dbeta: column sums over the tokens (kernels_column_reduce.cuh).
// 3. The tables. Tokens sharing a table row must add into it in a fixed
//    order — token order, as the CPU does. The tokens are sorted by the row
//    they read (CUB's stable radix sort of (row, token) pairs: equal rows keep
//    token order), and one block per run of equal rows adds the run's ds
//    into its row in order: the CPU's additions, one by one, so the table
//    gradients are the CPU's bits wherever ds is. A run is as long as the row
//    is frequent in the batch: a position is read once per sequence, a word
//    as often as it occurs. The type table's rows are read by nearly every
//    token (runs of T), so a table of at most kFewRows rows is summed instead
//    as column sums, one per row (step 2's kernels; not the CPU's order,
//    within the op table's tolerance).
// The first version walked every token in one block per 256 columns, two
// block reductions per token: at T = 32,768 that was ~100 ms a step.
// Scratch (CudaBackend's reduction workspace): the means (2T floats), then
// the column sums' partials or the sort's buffers (5T ints + CUB's temp).
// When it cannot hold them (T in the millions), the first version runs.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>

#include "cuda/cuda_internal.h"
#include "cuda/kernels_column_reduce.cuh"
#include "cuda/kernels_common.cuh"
#include "cuda/kernels_embedding.cuh"
#include "cuda/kernels.h"

namespace stoke::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = 8;
constexpr int64_t kFewRows = 4;

// What every kernel here reads.
struct EmbeddingGrad {
  const void* dy;
  Elem dy_e;
  const int32_t* ids;
  const int32_t* positions;
  const int32_t* type_ids;  // null: every token has type 0
  const void* word;
  const void* pos;
  const void* type;  // null: no type table
  Elem we, pe, te;
  const float* mean;
  const float* rstd;
  const void* gamma;
  Elem gamma_e;
  int64_t H;

  __device__ __forceinline__ float s_at(int64_t t, int64_t c) const {
    return embedding_at(ids, positions, type_ids, word, pos, type, we, pe, te, t, H, c);
  }
};

// mg[t] = mean_c(dy gamma), mgx[t] = mean_c(dy gamma x_hat): a warp per token.
__global__ void token_means_kernel(float* mg, float* mgx, EmbeddingGrad a, int64_t T) {
  const int64_t t = blockIdx.x * int64_t{kWarpsPerBlock} + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (t >= T) return;  // warp-uniform
  const float mu = a.mean[t], r = a.rstd[t];
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t c = lane; c < a.H; c += 32) {
    const float g = load(a.dy, a.dy_e, t * a.H + c) * load(a.gamma, a.gamma_e, c);
    sg += g;
    sgx += g * ((a.s_at(t, c) - mu) * r);
  }
  sg = warp_sum(sg);
  sgx = warp_sum(sgx);
  if (lane == 0) {
    mg[t] = sg / static_cast<float>(a.H);
    mgx[t] = sgx / static_cast<float>(a.H);
  }
}

// ds[t, c], from the token's means.
struct DsOf {
  EmbeddingGrad a;
  const float* mg;
  const float* mgx;
  __device__ __forceinline__ float operator()(int64_t t, int64_t c) const {
    const float r = a.rstd[t];
    const float xhat = (a.s_at(t, c) - a.mean[t]) * r;
    return r * (load(a.dy, a.dy_e, t * a.H + c) * load(a.gamma, a.gamma_e, c) - mg[t] - xhat * mgx[t]);
  }
};

// What a token adds to dgamma and dbeta: dy x_hat and dy.
struct EmbeddingParamGradOf {
  EmbeddingGrad a;
  __device__ __forceinline__ void operator()(int64_t t, int64_t c, float (&acc)[2]) const {
    const float d = load(a.dy, a.dy_e, t * a.H + c);
    acc[0] += d * ((a.s_at(t, c) - a.mean[t]) * a.rstd[t]);
    acc[1] += d;
  }
};

// What a token adds to row `row` of a small table: ds when it reads that row.
struct TableRowGradOf {
  DsOf ds;
  const int32_t* keys;  // null: every token reads row 0
  int32_t row;
  __device__ __forceinline__ void operator()(int64_t t, int64_t c, float (&acc)[1]) const {
    if ((keys ? keys[t] : 0) == row) acc[0] += ds(t, c);
  }
};

__global__ void iota_kernel(int32_t* v, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    v[i] = static_cast<int32_t>(i);
}

// Block i starts a run when rows[i] differs from rows[i - 1]: it adds ds of
// the run's tokens (in token order) into the row, one addition at a time.
__global__ void run_scatter_kernel(float* table, const uint32_t* rows, const int32_t* tokens, DsOf ds, int64_t T) {
  const int64_t i = blockIdx.x;
  const uint32_t row = rows[i];
  if (i > 0 && rows[i - 1] == row) return;  // block-uniform
  int64_t end = i + 1;
  while (end < T && rows[end] == row) ++end;
  const int64_t H = ds.a.H;
  for (int64_t c = threadIdx.x; c < H; c += blockDim.x) {
    float acc = table[int64_t{row} * H + c];
    for (int64_t j = i; j < end; ++j) acc += ds(tokens[j], c);
    table[int64_t{row} * H + c] = acc;
  }
}

// The first version (see the header): a block per 256 columns walks the tokens in order.
__global__ void serial_embedding_backward_kernel(float* dword, float* dpos, float* dtype, float* dgamma, float* dbeta,
                                                 EmbeddingGrad a, int64_t T) {
  __shared__ float scratch[32];
  const int64_t H = a.H;
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const bool mine = c < H;
  const float gc = mine ? load(a.gamma, a.gamma_e, c) : 0.0f;
  float pg = 0.0f, pb = 0.0f;
  for (int64_t t = 0; t < T; ++t) {
    const float mu = a.mean[t], r = a.rstd[t];
    float sg = 0.0f, sgx = 0.0f;
    for (int64_t i = threadIdx.x; i < H; i += blockDim.x) {
      const float g = load(a.dy, a.dy_e, t * H + i) * load(a.gamma, a.gamma_e, i);
      sg += g;
      sgx += g * ((a.s_at(t, i) - mu) * r);
    }
    const float mg = block_sum(sg, scratch) / static_cast<float>(H);
    const float mgx = block_sum(sgx, scratch) / static_cast<float>(H);
    if (!mine) continue;
    const float d = load(a.dy, a.dy_e, t * H + c), xhat = (a.s_at(t, c) - mu) * r;
    pg += d * xhat;
    pb += d;
    const float ds = r * (d * gc - mg - xhat * mgx);
    if (dword) dword[int64_t{a.ids[t]} * H + c] += ds;
    if (dpos) dpos[int64_t{a.positions[t]} * H + c] += ds;
    if (dtype) dtype[(a.type_ids ? int64_t{a.type_ids[t]} : 0) * H + c] += ds;
  }
  if (!mine) return;
  if (dgamma) dgamma[c] += pg;
  if (dbeta) dbeta[c] += pb;
}

float* f32_or_null(const TensorView& t) { return t.empty() ? nullptr : t.as<float>(); }

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Bits that hold every row index of a table of `rows` rows.
int row_bits(int64_t rows) {
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) < rows) ++bits;
  return bits;
}

// The sort's buffers, carved from the scratch past the means.
struct SortBuffers {
  int32_t* tokens_in;  // 0, 1, ..., T - 1
  uint32_t* rows_out;
  int32_t* tokens_out;
  void* temp;
  size_t temp_bytes;
};

size_t sort_temp_bytes(int64_t T, int bits) {
  size_t bytes = 0;
  check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const uint32_t*>(nullptr),
                                             static_cast<uint32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                             static_cast<int32_t*>(nullptr), static_cast<int>(T), 0, bits),
             "cub::DeviceRadixSort (size)");
  return bytes;
}

// Adds ds into `table` (rows x H) by runs of equal rows (`keys`: the row each token reads).
// bits: at least row_bits(rows) (every sort of one call takes the same, the
// bits its temp size was asked for).
void scatter_by_runs(cudaStream_t s, const SortBuffers& b, float* table, int bits, const int32_t* keys,
                     const DsOf& ds, int64_t T) {
  size_t temp_bytes = b.temp_bytes;
  check_cuda(cub::DeviceRadixSort::SortPairs(b.temp, temp_bytes, reinterpret_cast<const uint32_t*>(keys), b.rows_out,
                                             b.tokens_in, b.tokens_out, static_cast<int>(T), 0, bits, s),
             "cub::DeviceRadixSort");
  run_scatter_kernel<<<static_cast<unsigned>(T), kThreads, 0, s>>>(table, b.rows_out, b.tokens_out, ds, T);
  check_launch("embedding run_scatter_kernel");
}

}  // namespace

void launch_embed_layernorm_backward(cudaStream_t s, const Scratch& scratch, const TensorView& dword,
                                     const TensorView& dpos, const TensorView& dtype, const TensorView& dgamma,
                                     const TensorView& dbeta, const TensorView& dy, const TensorView& ids,
                                     const TensorView& positions, const TensorView& type_ids, const TensorView& word,
                                     const TensorView& pos, const TensorView& type, const TensorView& mean,
                                     const TensorView& rstd, const TensorView& gamma) {
  const int64_t T = dy.dim(0), H = dy.dim(1);
  if (T == 0 || H == 0) return;
  const EmbeddingGrad a{dy.data,
                        elem_of(dy.dtype),
                        ids.as<const int32_t>(),
                        positions.as<const int32_t>(),
                        type_ids.empty() ? nullptr : type_ids.as<const int32_t>(),
                        word.data,
                        pos.data,
                        type.empty() ? nullptr : type.data,
                        elem_of(word.dtype),
                        elem_of(pos.dtype),
                        elem_of(type.dtype),
                        mean.as<const float>(),
                        rstd.as<const float>(),
                        gamma.data,
                        elem_of(gamma.dtype),
                        H};
  const bool sorted_types = !dtype.empty() && dtype.dim(0) > kFewRows;
  const int bits = row_bits(std::max({dword.empty() ? 1 : dword.dim(0), dpos.empty() ? 1 : dpos.dim(0),
                                      sorted_types ? dtype.dim(0) : 1}));
  const size_t means_bytes = aligned(2 * static_cast<size_t>(T) * sizeof(float));
  const size_t temp_bytes = sort_temp_bytes(T, bits);
  const size_t sort_bytes = 3 * aligned(static_cast<size_t>(T) * 4) + aligned(temp_bytes);
  if (T > INT32_MAX / 2 || means_bytes + sort_bytes > scratch.bytes) {
    serial_embedding_backward_kernel<<<static_cast<unsigned>((H + kThreads - 1) / kThreads), kThreads, 0, s>>>(
        f32_or_null(dword), f32_or_null(dpos), f32_or_null(dtype), f32_or_null(dgamma), f32_or_null(dbeta), a, T);
    check_launch("serial_embedding_backward_kernel");
    return;
  }
  auto* base = static_cast<unsigned char*>(scratch.data);
  float* mg = reinterpret_cast<float*>(base);
  float* mgx = mg + T;
  const Scratch rest{base + means_bytes, scratch.bytes - means_bytes};

  token_means_kernel<<<static_cast<unsigned>((T + kWarpsPerBlock - 1) / kWarpsPerBlock), 32 * kWarpsPerBlock, 0, s>>>(
      mg, mgx, a, T);
  check_launch("embedding token_means_kernel");
  const DsOf ds{a, mg, mgx};

  if (!dgamma.empty() || !dbeta.empty())
    column_reduce::launch<2>(s, rest, {{f32_or_null(dgamma), f32_or_null(dbeta)}}, EmbeddingParamGradOf{a}, T, H,
                             "embed_layernorm_backward dgamma/dbeta");
  if (!dtype.empty() && !sorted_types)
    for (int32_t r = 0; r < static_cast<int32_t>(dtype.dim(0)); ++r)
      column_reduce::launch<1>(s, rest, {{dtype.as<float>() + int64_t{r} * H}},
                               TableRowGradOf{ds, a.type_ids, r}, T, H, "embed_layernorm_backward dtype");

  if (dword.empty() && dpos.empty() && !sorted_types) return;
  // The column sums above are done with `rest` before the sort reuses it (stream order).
  unsigned char* p = static_cast<unsigned char*>(rest.data);
  SortBuffers b{};
  b.tokens_in = reinterpret_cast<int32_t*>(p);
  b.rows_out = reinterpret_cast<uint32_t*>(p + aligned(static_cast<size_t>(T) * 4));
  b.tokens_out = reinterpret_cast<int32_t*>(p + 2 * aligned(static_cast<size_t>(T) * 4));
  b.temp = p + 3 * aligned(static_cast<size_t>(T) * 4);
  b.temp_bytes = temp_bytes;
  iota_kernel<<<blocks_for(T, kThreads), kThreads, 0, s>>>(b.tokens_in, T);
  check_launch("embedding iota_kernel");
  if (!dword.empty()) scatter_by_runs(s, b, dword.as<float>(), bits, a.ids, ds, T);
  if (!dpos.empty()) scatter_by_runs(s, b, dpos.as<float>(), bits, a.positions, ds, T);
  if (sorted_types) {
    if (a.type_ids) {
      scatter_by_runs(s, b, dtype.as<float>(), bits, a.type_ids, ds, T);
    } else {  // every token reads row 0: one run of all of them
      column_reduce::launch<1>(s, rest, {{dtype.as<float>()}}, TableRowGradOf{ds, nullptr, 0}, T, H,
                               "embed_layernorm_backward dtype");
    }
  }
}

}  // namespace stoke::cuda
