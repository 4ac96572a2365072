// The index math of the flash-style training attention kernels
// (kernels_attention_flash_train.cu), written once for the kernels and for
// the CPU unit test that checks it (tests/unit/test_flash_tiles.cc): plain
// C++ on plain arrays, marked __host__ __device__ when nvcc compiles it.
//
// The work list: a kernel's grid x walks (sequence, 64-row tile) pairs, the
// tiles being query tiles (forward, dQ) or key tiles (dK/dV). Sequence b owns
// the slots from floor(cu[b] / 64) + b: at least ceil(len_b / 64) of them and
// at most one more (the slots between two sequences' first slots number
// floor((cu[b] mod 64 + len_b) / 64) + 1), so a block finds its pair from
// cu_seqlens alone (a binary search) — no host read, no scratch list, graph
// capture safe — and at most one block per sequence has no rows and exits.
// The inference kernel (kernels_attention.cu) walks the same list.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define STOKE_TILE_FN __host__ __device__ __forceinline__
#else
#define STOKE_TILE_FN inline
#endif

namespace stoke::cuda::flash_tiles {

inline constexpr int kTile = 64;  // rows of a query or key tile

// Slots in the work list of a batch of B sequences and T packed tokens:
// sum over b of (floor(cu[b+1] / 64) - floor(cu[b] / 64) + 1) <= T / 64 + B.
STOKE_TILE_FN int64_t slot_count(int64_t T, int64_t B) { return T / kTile + B; }

// Sequence b's first slot.
STOKE_TILE_FN int64_t first_slot(const int32_t* cu, int b) { return cu[b] / kTile + b; }

// A slot's sequence and the first row (in the sequence) of its tile; a start
// at or past the sequence's length is a spare slot (its block exits).
struct Tile {
  int b;
  int64_t start;
};
STOKE_TILE_FN Tile tile_of_slot(const int32_t* cu, int B, int64_t slot) {
  int lo = 0, hi = B - 1;  // the largest b with first_slot(b) <= slot (first_slot(0) = 0)
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (first_slot(cu, mid) <= slot)
      lo = mid;
    else
      hi = mid - 1;
  }
  return {lo, (slot - first_slot(cu, lo)) * kTile};
}

// Rows [first, end) of a sequence of `len` rows that hold every row a row of
// the tile [start, start + 64) can see under a sliding window (|i - j| <=
// window; 0: the whole sequence), first rounded down to a tile boundary, so
// the loop over [first, end) in steps of 64 visits whole tiles. Seeing is
// symmetric, so this is both the key tiles a query tile reads and the query
// tiles that read a key tile.
struct Range {
  int first, end;
};
STOKE_TILE_FN Range tiles_in_reach(int start, int len, int window) {
  if (window <= 0) return {0, len};
  const int64_t lo = int64_t{start} - window, hi = int64_t{start} + kTile + window;
  return {lo > 0 ? static_cast<int>(lo / kTile * kTile) : 0, hi < len ? static_cast<int>(hi) : len};
}

}  // namespace stoke::cuda::flash_tiles
