// Philox4x32-10 against the published known-answer vectors of Random123
// (kat_vectors, "philox4x32 10" lines), and the dropout layout of
// core/philox.h pinned with values worked out independently: the expected
// words of the layout tests come from a 12-line Python transcription of the
// Philox4x32-10 round (Salmon et al. 2011, Random123's philox.h), which itself
// reproduces the three KAT vectors below.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/philox.h"

namespace stoke {
namespace {

struct Kat {
  uint32_t counter[4];
  uint32_t key[2];
  uint32_t want[4];
};

TEST(Philox, KnownAnswerVectors) {
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    uint32_t out[4];
    philox::philox4x32_10(k.counter, k.key, out);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(out[j], k.want[j]) << "word " << j << " of counter " << k.counter[0];
  }
}

TEST(Philox, OutputMayBeTheCounter) {
  uint32_t c[4] = {0, 0, 0, 0};
  const uint32_t key[2] = {0, 0};
  philox::philox4x32_10(c, key, c);
  EXPECT_EQ(c[0], 0x6627e8d5u);
  EXPECT_EQ(c[3], 0x9b00dbd8u);
}

// The layout: key = (seed lo, seed hi), counter = (block lo, block hi,
// tensor_id, step), block = index / 4, word index % 4.
TEST(Philox, LayoutOfKeyAndCounter) {
  const uint64_t seed = 0x0123456789abcdefull;
  uint32_t w[4];
  philox::block_bits(seed, /*step=*/7, /*tensor_id=*/3, /*block=*/5, w);
  EXPECT_EQ(w[0], 0x7d64b66du);
  EXPECT_EQ(w[1], 0x5257bce4u);
  EXPECT_EQ(w[2], 0x20c40945u);
  EXPECT_EQ(w[3], 0x73e156f6u);
  // The same through the raw generator: the counter words are where the layout says.
  const uint32_t counter[4] = {5, 0, 3, 7}, key[2] = {0x89abcdef, 0x01234567};
  uint32_t raw[4];
  philox::philox4x32_10(counter, key, raw);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(raw[j], w[j]);
  // The block's high word is counter word 1; step and tensor id fill words 3 and 2.
  philox::block_bits(seed, 0xfffffffe, 0xffffffff, uint64_t{1} << 32, w);
  EXPECT_EQ(w[0], 0x83470fd9u);
  EXPECT_EQ(w[1], 0x2132ba14u);
  EXPECT_EQ(w[2], 0x2f49b414u);
  EXPECT_EQ(w[3], 0xfe482b00u);
  // Element 4 * 5 + 2 is word 2 of block 5: 0x20c40945 >> 8 = 2147337, times 2^-24.
  EXPECT_EQ(philox::element_uniform(seed, 7, 3, 22), 2147337.0f / 16777216.0f);
}

TEST(Philox, UniformUsesTheTop24Bits) {
  EXPECT_EQ(philox::uniform(0), 0.0f);
  EXPECT_EQ(philox::uniform(0xff), 0.0f);  // the low 8 bits are dropped
  EXPECT_EQ(philox::uniform(0x100), 0x1.0p-24f);
  EXPECT_EQ(philox::uniform(0x80000000u), 0.5f);
  EXPECT_EQ(philox::uniform(0xffffffffu), 1.0f - 0x1.0p-24f);  // never 1: p = 1 drops everything
}

TEST(Philox, FillUniformMatchesElementUniformAtAnyOffset) {
  const uint64_t seed = 42;
  for (uint64_t first : {0ull, 1ull, 3ull, 4ull, 5ull, 1021ull, (1ull << 34) - 3}) {
    for (int64_t n : {0, 1, 2, 3, 4, 5, 9, 33}) {
      std::vector<float> got(static_cast<size_t>(n));
      philox::fill_uniform(seed, 2, 9, first, n, got.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(got[static_cast<size_t>(i)], philox::element_uniform(seed, 2, 9, first + static_cast<uint64_t>(i)))
            << "first " << first << " n " << n << " i " << i;
    }
  }
}

// Every key part changes the stream: different seeds, steps, tensors and
// elements give (almost surely) different draws.
TEST(Philox, EachKeyPartChangesTheDraw) {
  const float base = philox::element_uniform(1, 1, 1, 1);
  EXPECT_NE(base, philox::element_uniform(2, 1, 1, 1));
  EXPECT_NE(base, philox::element_uniform(1ull | (1ull << 32), 1, 1, 1));  // the seed's high half counts
  EXPECT_NE(base, philox::element_uniform(1, 2, 1, 1));
  EXPECT_NE(base, philox::element_uniform(1, 1, 2, 1));
  EXPECT_NE(base, philox::element_uniform(1, 1, 1, 2));
  EXPECT_NE(base, philox::element_uniform(1, 1, 1, 1 + (4ull << 32)));  // the block's high word counts
}

// A sanity check of the stream's statistics (not a randomness test suite):
// mean 1/2 and variance 1/12 of 2^20 uniforms, within 6 standard errors.
TEST(Philox, UniformMoments) {
  const int64_t n = 1 << 20;
  std::vector<float> u(static_cast<size_t>(n));
  philox::fill_uniform(7, 0, 0, 0, n, u.data());
  double sum = 0.0, sum_sq = 0.0;
  for (float x : u) {
    ASSERT_GE(x, 0.0f);
    ASSERT_LT(x, 1.0f);
    sum += x;
    sum_sq += static_cast<double>(x) * x;
  }
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 6.0 * std::sqrt(1.0 / 12.0 / n));
  EXPECT_NEAR(var, 1.0 / 12.0, 6.0 * std::sqrt(1.0 / 180.0 / n));  // var of (U - 1/2)^2 is 1/180
}

}  // namespace
}  // namespace stoke
