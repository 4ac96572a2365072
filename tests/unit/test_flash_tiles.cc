// The index math of the flash-style training attention (src/cuda/flash_tiles.h),
// checked on the CPU: the work list gives every 64-row tile of every sequence
// exactly one block (and at most one spare block per sequence), and the tile
// range under a sliding window holds every row a tile can see, starts on a
// tile boundary and wastes no whole tile. The kernels themselves run in the
// op table on a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cuda/flash_tiles.h"

namespace stoke::cuda::flash_tiles {
namespace {

std::vector<int32_t> cu_of(const std::vector<int32_t>& lens) {
  std::vector<int32_t> cu{0};
  for (int32_t n : lens) cu.push_back(cu.back() + n);
  return cu;
}

void expect_work_list_covers(const std::vector<int32_t>& lens) {
  const std::vector<int32_t> cu = cu_of(lens);
  const int B = static_cast<int>(lens.size());
  const int64_t slots = slot_count(cu.back(), B);
  std::map<std::pair<int, int64_t>, int> seen;  // (sequence, tile start) -> blocks
  std::vector<int> spare(lens.size(), 0);
  for (int64_t slot = 0; slot < slots; ++slot) {
    const Tile t = tile_of_slot(cu.data(), B, slot);
    ASSERT_GE(t.b, 0);
    ASSERT_LT(t.b, B);
    ASSERT_GE(t.start, 0);
    EXPECT_EQ(t.start % kTile, 0);
    if (t.start >= lens[t.b])
      ++spare[t.b];
    else
      ++seen[{t.b, t.start}];
  }
  for (int b = 0; b < B; ++b) {
    SCOPED_TRACE("sequence " + std::to_string(b) + " of length " + std::to_string(lens[b]));
    for (int64_t start = 0; start < lens[b]; start += kTile) EXPECT_EQ((seen[{b, start}]), 1) << "tile " << start;
    EXPECT_LE(spare[b], 1);
  }
  int64_t tiles = 0;
  for (int32_t n : lens) tiles += (n + kTile - 1) / kTile;
  EXPECT_EQ(static_cast<int64_t>(seen.size()), tiles);
}

TEST(FlashTiles, WorkListGivesEveryTileOneBlock) {
  expect_work_list_covers({1});
  expect_work_list_covers({64});
  expect_work_list_covers({1, 63, 64, 65, 130});
  expect_work_list_covers({700, 5, 64, 128, 129});
  expect_work_list_covers({63, 1, 63, 1, 0, 64, 0, 65});  // tile edges and empty sequences
  // Random batches: every offset of a sequence start within a tile.
  std::srand(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int32_t> lens;
    const int B = 1 + std::rand() % 12;
    for (int b = 0; b < B; ++b) lens.push_back(std::rand() % 4 == 0 ? std::rand() % 3 : 1 + std::rand() % 300);
    expect_work_list_covers(lens);
  }
}

// Whether a row of tile [start, start + 64) sees row j of a sequence of len rows.
bool tile_sees(int start, int len, int window, int j) {
  for (int i = start; i < start + kTile && i < len; ++i)
    if (window == 0 || std::abs(i - j) <= window) return true;
  return false;
}

TEST(FlashTiles, ReachHoldsEverySeenRowAndNoWholeUnseenTile) {
  for (int len : {1, 2, 63, 64, 65, 127, 128, 130, 700})
    for (int window : {0, 1, 5, 40, 63, 64, 65, 100, 128, 1000})
      for (int start = 0; start < len; start += kTile) {
        SCOPED_TRACE("len " + std::to_string(len) + " window " + std::to_string(window) + " tile " +
                     std::to_string(start));
        const Range r = tiles_in_reach(start, len, window);
        EXPECT_EQ(r.first % kTile, 0);
        EXPECT_GE(r.first, 0);
        EXPECT_LE(r.end, len);
        EXPECT_LT(r.first, r.end);  // a tile always sees itself
        for (int j = 0; j < len; ++j) {
          if (tile_sees(start, len, window, j)) {
            EXPECT_TRUE(r.first <= j && j < r.end) << "row " << j;
          }
        }
        // Tight: the first tile and the last row of the range are seen.
        bool first_tile_seen = false;
        for (int j = r.first; j < r.first + kTile && j < len; ++j) first_tile_seen |= tile_sees(start, len, window, j);
        EXPECT_TRUE(first_tile_seen);
        EXPECT_TRUE(tile_sees(start, len, window, r.end - 1));
      }
}

}  // namespace
}  // namespace stoke::cuda::flash_tiles
