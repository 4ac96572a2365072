#include <gtest/gtest.h>

#include <atomic>
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
