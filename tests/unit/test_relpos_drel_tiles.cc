// The index math of MPNet's drel on CUDA (src/cuda/relpos_drel_tiles.h),
// checked on the CPU by replaying both passes of drel's kernels
// (kernels_attention_relpos.cu) on a random dS: the per-tile diagonal sums,
// the carry between key tiles, the entries of the partial rows (every one
// pass 2 reads was written, none outside the row's width) and the sums per
// distance, against the sum over (i, j) taken directly. The kernels
// themselves run in the op table on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "cuda/relpos_drel_tiles.h"

namespace stoke::cuda::relpos_drel {
namespace {

struct Batch {
  std::vector<int32_t> cu{0};
  std::vector<std::vector<double>> ds;  // per sequence, len x len
};

Batch random_batch(const std::vector<int32_t>& lens, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Batch b;
  for (int32_t n : lens) {
    b.cu.push_back(b.cu.back() + n);
    std::vector<double> m(static_cast<size_t>(n) * n);
    for (double& x : m) x = u(rng);
    b.ds.push_back(std::move(m));
  }
  return b;
}

// The two passes as the kernels run them (one head) into drel, the rows'
// unwritten entries NaN so a read of one shows.
void tiled_drel(const Batch& batch, int max_seqlen, std::vector<double>& drel) {
  const int B = static_cast<int>(batch.ds.size());
  const int64_t slots = flash_tiles::slot_count(batch.cu.back(), B), E = row_entries(max_seqlen);
  std::vector<double> part(static_cast<size_t>(slots * E), std::numeric_limits<double>::quiet_NaN());
  for (int64_t slot = 0; slot < slots; ++slot) {
    const flash_tiles::Tile tile = flash_tiles::tile_of_slot(batch.cu.data(), B, slot);
    const int len = batch.cu[tile.b + 1] - batch.cu[tile.b];
    if (tile.start >= len) continue;
    const int q0 = static_cast<int>(tile.start), tiles = (len + kTile - 1) / kTile;
    const std::vector<double>& ds = batch.ds[static_cast<size_t>(tile.b)];
    double carry[2][kTile - 1] = {};
    for (int kt = 0; kt < tiles; ++kt) {
      const int k0 = kt * kTile;
      for (int o = -(kTile - 1); o <= kTile - 1; ++o) {
        double diag = 0.0;
        for (int n = 0; n < diagonal_length(o); ++n) {
          const Cell c = diagonal_cell(o, n);
          ASSERT_GE(c.i, 0);
          ASSERT_LT(c.i, kTile);
          ASSERT_GE(c.j, 0);
          ASSERT_LT(c.j, kTile);
          EXPECT_EQ(c.j - c.i, o);
          const int i = q0 + c.i, j = k0 + c.j;
          if (i < len && j < len) diag += ds[static_cast<size_t>(i) * len + j];
        }
        if (is_final(kt, tiles, o)) {
          const int64_t e = diagonal_entry(k0, o);
          ASSERT_GE(e, 0);
          ASSERT_LT(e, entries_of(len));
          ASSERT_LT(entries_of(len), E);
          EXPECT_EQ(e, entry_of_distance(k0 - q0 + o, q0));
          ASSERT_TRUE(std::isnan(part[static_cast<size_t>(slot * E + e)])) << "entry written twice";
          const double carried = takes_carry(kt, o) ? carry[(kt - 1) & 1][carry_index(o)] : 0.0;
          part[static_cast<size_t>(slot * E + e)] = diag + carried;
        } else {
          carry[kt & 1][carry_index(o)] = diag;
        }
      }
    }
  }
  drel.assign(static_cast<size_t>(2 * max_seqlen - 1), 0.0);
  for (int r = 0; r < 2 * max_seqlen - 1; ++r) {
    const int delta = r - (max_seqlen - 1), distance = std::abs(delta);
    for (int b = 0; b < B; ++b) {
      const int len = batch.cu[b + 1] - batch.cu[b];
      if (len <= distance) continue;
      for (int q0 = 0; q0 < len; q0 += kTile) {
        const int64_t e = entry_of_distance(delta, q0);
        if (e < 0 || e >= entries_of(len)) continue;
        const double v = part[static_cast<size_t>((flash_tiles::first_slot(batch.cu.data(), b) + q0 / kTile) * E + e)];
        EXPECT_FALSE(std::isnan(v)) << "unwritten entry " << e << " of sequence " << b << " tile " << q0;
        drel[static_cast<size_t>(r)] += v;
      }
    }
  }
}

std::vector<double> direct_drel(const Batch& batch, int max_seqlen) {
  std::vector<double> drel(static_cast<size_t>(2 * max_seqlen - 1), 0.0);
  for (size_t b = 0; b < batch.ds.size(); ++b) {
    const int len = batch.cu[b + 1] - batch.cu[b];
    for (int i = 0; i < len; ++i)
      for (int j = 0; j < len; ++j)
        drel[static_cast<size_t>(j - i + max_seqlen - 1)] += batch.ds[b][static_cast<size_t>(i) * len + j];
  }
  return drel;
}

TEST(RelposDrelTiles, TiledSumsEqualDirectSums) {
  std::mt19937 rng(7);
  const std::vector<std::vector<int32_t>> batches = {
      {1}, {63}, {64}, {65}, {1, 63, 64, 65, 130}, {200, 3, 129, 64, 191}, {300, 1, 1, 257}};
  for (const std::vector<int32_t>& lens : batches) {
    int max_seqlen = 0;
    for (int32_t n : lens) max_seqlen = std::max(max_seqlen, static_cast<int>(n));
    for (int extra : {0, 37}) {  // max_seqlen past the longest sequence too
      const Batch batch = random_batch(lens, rng);
      const std::vector<double> want = direct_drel(batch, max_seqlen + extra);
      std::vector<double> got;
      tiled_drel(batch, max_seqlen + extra, got);
      ASSERT_EQ(got.size(), want.size());
      for (size_t r = 0; r < want.size(); ++r)
        EXPECT_NEAR(got[r], want[r], 1e-9 * (1.0 + std::abs(want[r]))) << "r " << r << " of " << lens.size() << " seqs";
    }
  }
}

TEST(RelposDrelTiles, HeadsPerPassFitTheWorkspace) {
  const int64_t slots = flash_tiles::slot_count(32768, 256);  // 768
  const size_t per_head = static_cast<size_t>(slots) * static_cast<size_t>(row_entries(128)) * sizeof(float);
  EXPECT_EQ(row_entries(128), 192);
  EXPECT_EQ(heads_per_pass(slots, 12, 128, size_t{32} << 20), 12);  // BERT-base shapes: one pass
  EXPECT_EQ(heads_per_pass(slots, 12, 128, 5 * per_head + per_head / 2), 5);
  EXPECT_EQ(heads_per_pass(slots, 12, 128, per_head), 1);
  EXPECT_EQ(heads_per_pass(slots, 12, 128, per_head - 1), 0);  // the fallback
  EXPECT_EQ(heads_per_pass(slots, 12, 128, 0), 0);
  EXPECT_EQ(heads_per_pass(flash_tiles::slot_count(65536, 128), 12, 512, size_t{32} << 20), 12);
}

}  // namespace
}  // namespace stoke::cuda::relpos_drel
