#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace stoke {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  ThreadPool pool(3);
  for (size_t n : {0u, 1u, 2u, 3u, 7u, 1000u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) hits[i]++;
    });
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPool, RethrowsTheWorkersError) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(10,
                                 [](size_t b, size_t) {
                                   if (b > 0) throw Error(Errc::internal, "boom");
                                 }),
               Error);
}

TEST(DType, NamesRoundTrip) {
  for (auto name : {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"}) {
    auto t = dtype_from_name(name);
    ASSERT_TRUE(t.has_value()) << name;
    EXPECT_EQ(dtype_name(*t), name);
  }
  EXPECT_FALSE(dtype_from_name("F8_E4M3").has_value());
  EXPECT_FALSE(dtype_from_name("f32").has_value());
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::i64), 8u);
}

}  // namespace
}  // namespace stoke

#include "core/half.h"
#include "core/sha256.h"

namespace stoke {
namespace {

TEST(Sha256, KnownVectors) {
  // FIPS 180-4 examples.
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Fed in uneven pieces, the same digest.
  const std::string million(1000000, 'a');
  Sha256 h;
  for (size_t i = 0; i < million.size(); i += 997) h.update(million.data() + i, std::min<size_t>(997, million.size() - i));
  EXPECT_EQ(h.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(HalfPrecision, EveryValueRoundTripsAndRoundingIsToNearestEven) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const f16 h{static_cast<uint16_t>(b)};
    const float f = to_float(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(to_f16(f).bits, h.bits) << b;
    const bf16 g{static_cast<uint16_t>(b)};
    if (!std::isnan(to_float(g))) EXPECT_EQ(to_bf16(to_float(g)).bits, g.bits) << b;
  }
  EXPECT_EQ(to_bf16(1.0f + 1.0f / 256).bits, to_bf16(1.0f).bits);               // tie -> even
  EXPECT_EQ(to_bf16(1.0f + 3.0f / 256).bits, to_bf16(1.0f + 4.0f / 256).bits);  // tie -> even (up)
  EXPECT_EQ(to_float(to_f16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(to_float(to_f16(70000.0f))));
  EXPECT_EQ(to_float(to_f16(5.96046448e-08f)), 5.96046448e-08f);  // smallest subnormal
}

}  // namespace
}  // namespace stoke
