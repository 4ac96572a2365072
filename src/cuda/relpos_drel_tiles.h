// The index math of MPNet's drel on CUDA (kernels_attention_relpos.cu), written
// once for the kernels and for the CPU unit test that replays the scheme
// (tests/unit/test_relpos_drel_tiles.cc): plain C++ on plain integers, marked
// __host__ __device__ when nvcc compiles it.
//
// drel[r, h] = sum over sequences and queries i of dS_ij, j = i + delta,
// delta = r - (max_seqlen - 1). Pass 1 is a block per (sequence, 64-query
// tile, head) from flash_tiles' work list; it walks the key tiles in order
// and sums each 64 x 64 tile pair's dS along its 127 diagonals o = j - i
// (local indices, -63 .. 63). A distance delta = k0 - q0 + o meets two key
// tiles, k0 (diagonal o) and k0 + 64 (diagonal o - 64), so the block keeps
// the diagonals o >= 1 of one key tile and adds them to the next tile's
// o - 64: every distance the query tile has is then ONE value, written once
// to the tile's row of partials at entry e = delta + q0 + 63 (0 .. the row's
// entries_of(len) - 1). Pass 2 sums, per (delta, head), the entries of every
// query tile of every sequence, sequences and tiles in order: no atomics, the
// same order on every run and every GPU.
//
// The partials [slot][head of the pass][row_entries(max_seqlen)] f32 live in
// the backend's reduction workspace; heads go in passes of as many as it
// holds (heads_per_pass), and a batch whose single head does not fit takes
// the walk over tokens instead (the kernels' fallback).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/flash_tiles.h"

namespace stoke::cuda::relpos_drel {

using flash_tiles::kTile;

// Entry of distance delta in the row of the query tile starting at q0.
STOKE_TILE_FN int64_t entry_of_distance(int delta, int q0) { return int64_t{delta} + q0 + (kTile - 1); }

// Entry of local diagonal o (j - i within the tile pair) of key tile k0:
// entry_of_distance(k0 - q0 + o, q0), whatever q0.
STOKE_TILE_FN int64_t diagonal_entry(int k0, int o) { return int64_t{k0} + (kTile - 1) + o; }

// Entries a query tile of a sequence of len rows writes: [0, entries_of(len)),
// every distance from -(q0 + 63) to (last key tile + 63) - q0.
STOKE_TILE_FN int64_t entries_of(int len) { return (int64_t{len} + kTile - 1) / kTile * kTile + (kTile - 1); }

// A row's width in the partials: entries_of(max_seqlen) rounded up.
STOKE_TILE_FN int64_t row_entries(int max_seqlen) {
  return (int64_t{max_seqlen} + kTile - 1) / kTile * kTile + kTile;
}

// Cell n (0 .. 63 - |o|) of local diagonal o, as (row, column) of the tile pair.
struct Cell {
  int i, j;
};
STOKE_TILE_FN Cell diagonal_cell(int o, int n) { return o >= 0 ? Cell{n, n + o} : Cell{n - o, n}; }
STOKE_TILE_FN int diagonal_length(int o) { return kTile - (o >= 0 ? o : -o); }

// How a key tile's diagonal sum is used (key tile kt of `tiles`): o <= 0 is
// final at its entry, plus the previous key tile's diagonal o + 64 when
// there is one (kt > 0, o <= -1); o >= 1 is kept for the next key tile, or
// final at its entry on the last one.
STOKE_TILE_FN bool takes_carry(int kt, int o) { return kt > 0 && o <= -1; }
STOKE_TILE_FN bool is_final(int kt, int tiles, int o) { return o <= 0 || kt == tiles - 1; }
STOKE_TILE_FN int carry_index(int o) { return o >= 1 ? o - 1 : o + (kTile - 1); }  // kept o and its reader o - 64 agree

// Heads per pass whose partials the workspace holds (at most `heads`); 0:
// not even one (the fallback).
inline int heads_per_pass(int64_t slots, int heads, int max_seqlen, size_t workspace_bytes) {
  const size_t per_head = static_cast<size_t>(slots) * static_cast<size_t>(row_entries(max_seqlen)) * sizeof(float);
  if (per_head == 0) return heads;
  const size_t fit = workspace_bytes / per_head;
  return fit >= static_cast<size_t>(heads) ? heads : static_cast<int>(fit);
}

}  // namespace stoke::cuda::relpos_drel
