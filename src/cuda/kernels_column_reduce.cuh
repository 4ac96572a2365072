// Per-column sums over the rows of a [T, N] matrix — the parameter gradients
// of a bias, a LayerNorm's gamma and beta, a small embedding table — fast and
// deterministic without atomics, in two passes:
//   1. the rows are cut into fixed chunks (64 rows, more when the scratch
//      cannot hold a partial row per chunk); a thread per (column, chunk)
//      sums its chunk's rows in order into partial[chunk][column];
//   2. a block per 32 columns sums the chunks' partials in a fixed order
//      (8 warps take every 8th chunk in order, then one tree of 8) and adds
//      the total into the output.
// The chunking depends only on T, N and the scratch's size, never on the
// GPU or the scheduling, so every run gives the same bits. The first
// version walked every row in one thread per column: at T = 32,768 and
// N = 768 that is 3 blocks on a 132-SM GPU, each thread 32,768 loads deep —
// milliseconds per call, several calls per layer. Here the first pass has
// ceil(N / 128) x T / 64 blocks.
//
// A `Row` policy says what one row adds to each of the kOut sums of a column:
//   __device__ void operator()(int64_t t, int64_t c, float (&acc)[kOut]) const
// (e.g. dy[t, c] for a bias; dy * x_hat and dy for gamma and beta).
#pragma once

#include <algorithm>
#include <cstdint>

#include "cuda/cuda_internal.h"
#include "cuda/kernels_common.cuh"
#include "cuda/kernels.h"

namespace stoke::cuda::column_reduce {

constexpr int64_t kChunkRows = 64;
constexpr int kPartialThreads = 128;  // pass 1: a thread per column
constexpr int kFinishWarps = 8;       // pass 2: 32 columns x 8 warps

template <int kOut>
struct Outs {
  float* p[kOut];  // each may be null (that sum is not wanted)
};

struct Plan {
  int64_t chunks = 1, rows_per_chunk = 0;
  bool direct = true;  // one chunk: pass 1 adds into the outputs, no pass 2
};

// The chunks for T rows, N columns and kOut sums, within `floats` of scratch.
inline Plan plan(int64_t T, int64_t N, int outs, size_t floats) {
  Plan p;
  const int64_t wanted = std::min<int64_t>((T + kChunkRows - 1) / kChunkRows, 65535);
  const int64_t fits = static_cast<int64_t>(floats / static_cast<size_t>(N * outs));
  p.chunks = std::max<int64_t>(1, std::min(wanted, fits));
  p.rows_per_chunk = (T + p.chunks - 1) / p.chunks;
  p.direct = p.chunks == 1;
  return p;
}

template <int kOut, class Row>
__global__ void __launch_bounds__(kPartialThreads)
    partials_kernel(float* partial, Outs<kOut> outs, Row row, int64_t T, int64_t N, int64_t rows_per_chunk,
                    bool direct) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= N) return;
  const int64_t chunk = blockIdx.y, chunks = gridDim.y;
  const int64_t t0 = chunk * rows_per_chunk, t1 = t0 + rows_per_chunk < T ? t0 + rows_per_chunk : T;
  float acc[kOut];
#pragma unroll
  for (int o = 0; o < kOut; ++o) acc[o] = 0.0f;
  for (int64_t t = t0; t < t1; ++t) row(t, c, acc);
#pragma unroll
  for (int o = 0; o < kOut; ++o) {
    if (direct) {
      if (outs.p[o]) outs.p[o][c] += acc[o];
    } else {
      partial[(o * chunks + chunk) * N + c] = acc[o];
    }
  }
}

template <int kOut>
__global__ void __launch_bounds__(32 * kFinishWarps)
    finish_kernel(Outs<kOut> outs, const float* partial, int64_t chunks, int64_t N) {
  __shared__ float part[kFinishWarps][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t c = blockIdx.x * int64_t{32} + lane;
#pragma unroll
  for (int o = 0; o < kOut; ++o) {
    float acc = 0.0f;
    if (c < N)
      for (int64_t k = warp; k < chunks; k += kFinishWarps) acc += partial[(o * chunks + k) * N + c];
    part[warp][lane] = acc;
    __syncthreads();
    if (warp == 0 && c < N && outs.p[o]) {
      float total = part[0][lane];
#pragma unroll
      for (int w = 1; w < kFinishWarps; ++w) total += part[w][lane];
      outs.p[o][c] += total;
    }
    __syncthreads();  // part is rewritten by the next sum
  }
}

// outs[o][c] += sum over rows t of what `row` adds, for c < N.
template <int kOut, class Row>
void launch(cudaStream_t s, const Scratch& scratch, Outs<kOut> outs, Row row, int64_t T, int64_t N,
            const char* name) {
  if (T == 0 || N == 0) return;
  const Plan p = plan(T, N, kOut, scratch.bytes / sizeof(float));
  float* partial = static_cast<float*>(scratch.data);
  const dim3 grid(static_cast<unsigned>((N + kPartialThreads - 1) / kPartialThreads),
                  static_cast<unsigned>(p.chunks));
  partials_kernel<kOut, Row><<<grid, kPartialThreads, 0, s>>>(partial, outs, row, T, N, p.rows_per_chunk, p.direct);
  check_launch(name);
  if (p.direct) return;
  finish_kernel<kOut><<<static_cast<unsigned>((N + 31) / 32), 32 * kFinishWarps, 0, s>>>(outs, partial, p.chunks, N);
  check_launch(name);
}

// The plain column sum: dy[t, c].
struct ColumnOf {
  const void* dy;
  Elem e;
  int64_t N;
  __device__ __forceinline__ void operator()(int64_t t, int64_t c, float (&acc)[1]) const {
    acc[0] += load(dy, e, t * N + c);
  }
};

}  // namespace stoke::cuda::column_reduce
