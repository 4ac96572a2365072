// The ColBERT ops beyond the op table's reference comparison: what
// attention_keys means (a query's result is attention over the sequence's
// first keys alone; all keys is attention itself, bit for bit on each CPU
// set), maxsim on numbers worked by hand (PyLate's colbert_scores docstring
// case, with its documents mask), and the refusals of bad key counts and
// offsets.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "cpu/kernels.h"
#include "support/host_tensors.h"

namespace stoke {
namespace {

using test::host_tensors::get;
using test::host_tensors::HostTensor;
using test::host_tensors::host_tensor;
using test::host_tensors::index_tensor;
using test::host_tensors::random_tensor;
using test::host_tensors::Rng;

HostTensor cu_of(const std::vector<int32_t>& lens) {
  std::vector<int32_t> cu{0};
  for (int32_t n : lens) cu.push_back(cu.back() + n);
  return index_tensor(cu);
}

const cpu::Kernels* sets[] = {&cpu::reference_kernels(), &cpu::fast_kernels()};

TEST(AttentionKeys, EveryTokenAKeyIsAttentionBitForBit) {
  const std::vector<int32_t> lens = {70, 3, 300, 1, 41};
  const int64_t T = 415;
  const int heads = 2, d = 24;
  for (const cpu::Kernels* k : sets)
    for (int window : {0, 40}) {
      Rng rng(7);
      const HostTensor qkv = random_tensor(rng, DType::f32, {T, 3 * heads * d}, -2.5, 2.5);
      HostTensor a = host_tensor(DType::f32, {T, heads * d}), b = host_tensor(DType::f32, {T, heads * d});
      k->attention(a.view, qkv.view, cu_of(lens).view, heads, 300, window);
      k->attention_keys(b.view, qkv.view, cu_of(lens).view, index_tensor(lens).view, heads, 300, window);
      EXPECT_EQ(std::memcmp(a.view.data, b.view.data, static_cast<size_t>(T * heads * d) * 4), 0)
          << k->name << " window " << window;
    }
}

// Sequence [real tokens | expansion tokens]: the real tokens' outputs are
// attention over the real tokens alone (the expansion tokens change nothing
// for them), and an expansion token's output is its attention over the
// real tokens as keys — computed here as attention over the real tokens
// with that token's query put in place of the last one's.
TEST(AttentionKeys, ExpansionTokensAreQueriesNotKeys) {
  const int heads = 2, d = 16;
  const int32_t keys = 5, len = 12;
  const int64_t C = 3 * heads * d;
  for (const cpu::Kernels* k : sets) {
    Rng rng(11);
    const HostTensor qkv = random_tensor(rng, DType::f32, {len, C}, -2, 2);
    HostTensor out = host_tensor(DType::f32, {len, heads * d});
    k->attention_keys(out.view, qkv.view, cu_of({len}).view, index_tensor({keys}).view, heads, len, 0);
    for (int32_t i = 0; i < len; ++i) {
      // keys rows of qkv, the last one's q replaced by row i's q when i is an expansion token.
      HostTensor part = host_tensor(DType::f32, {keys, C});
      std::memcpy(part.view.data, qkv.view.data, static_cast<size_t>(keys * C) * 4);
      const int32_t row = i < keys ? i : keys - 1;
      if (i >= keys)
        std::memcpy(static_cast<float*>(part.view.data) + row * C, static_cast<const float*>(qkv.view.data) + i * C,
                    static_cast<size_t>(heads * d) * 4);
      HostTensor want = host_tensor(DType::f32, {keys, heads * d});
      cpu::reference_kernels().attention(want.view, part.view, cu_of({keys}).view, heads, keys, 0);
      for (int64_t c = 0; c < heads * d; ++c)
        EXPECT_NEAR(get(out.view, i * heads * d + c), get(want.view, row * heads * d + c), 1e-5)
            << k->name << " token " << i << " column " << c;
    }
  }
}

TEST(AttentionKeys, BadKeyCountsAreRefused) {
  const HostTensor qkv = host_tensor(DType::f32, {4, 6});
  HostTensor out = host_tensor(DType::f32, {4, 2});
  for (const cpu::Kernels* k : sets) {
    EXPECT_THROW(k->attention_keys(out.view, qkv.view, cu_of({4}).view, index_tensor({0}).view, 1, 4, 0), Error);
    EXPECT_THROW(k->attention_keys(out.view, qkv.view, cu_of({4}).view, index_tensor({5}).view, 1, 4, 0), Error);
    EXPECT_THROW(k->attention_keys(out.view, qkv.view, cu_of({2, 2}).view, index_tensor({1}).view, 1, 4, 0), Error);
    // window 1: the last query (3) reaches key 2 at the least, and there is only key 0
    EXPECT_THROW(k->attention_keys(out.view, qkv.view, cu_of({4}).view, index_tensor({1}).view, 1, 4, 1), Error);
  }
}

// PyLate's colbert_scores docstring: 1-d vectors; its document 1 masks its
// second vector (here: left out), and its third query masks a vector (here:
// a query of its other three).
TEST(MaxSim, PylateDocstringScores) {
  auto tensor = [](std::vector<float> v, int64_t rows) {
    HostTensor t = host_tensor(DType::f32, {rows, 1});
    std::memcpy(t.view.data, v.data(), v.size() * 4);
    return t;
  };
  const HostTensor docs = tensor({10, 0, 1, /**/ 0, 10, /**/ 1, 0, 1000}, 8);
  const HostTensor offsets = index_tensor({0, 3, 5, 8});
  const std::vector<std::pair<std::vector<float>, std::vector<float>>> cases = {
      {{1, 0, 0, 0}, {10, 10, 1000}}, {{0, 2, 0, 0}, {20, 20, 2000}}, {{0, 0, 0}, {0, 0, 0}}};
  for (const cpu::Kernels* k : sets)
    for (const auto& [q, want] : cases) {
      const HostTensor qt = tensor(q, static_cast<int64_t>(q.size()));
      HostTensor scores = host_tensor(DType::f32, {3});
      k->maxsim(scores.view, qt.view, docs.view, offsets.view);
      for (int64_t n = 0; n < 3; ++n) EXPECT_EQ(get(scores.view, n), want[static_cast<size_t>(n)]) << k->name;
    }
}

TEST(MaxSim, NegativeBestMatchesAndEmptyDocuments) {
  // Best matches below 0 count as they are (no zero padding), an empty document scores 0.
  HostTensor q = host_tensor(DType::f32, {2, 2}), docs = host_tensor(DType::f32, {2, 2});
  const float qv[] = {1, 0, 0, 1}, dv[] = {-1, -2, -3, -0.5f};
  std::memcpy(q.view.data, qv, sizeof qv);
  std::memcpy(docs.view.data, dv, sizeof dv);
  for (const cpu::Kernels* k : sets) {
    HostTensor scores = host_tensor(DType::f32, {2});
    k->maxsim(scores.view, q.view, docs.view, index_tensor({0, 0, 2}).view);
    EXPECT_EQ(get(scores.view, 0), 0.0) << k->name;
    EXPECT_EQ(get(scores.view, 1), -1.0 + -0.5) << k->name;  // max(-1, -3) + max(-2, -0.5)
    EXPECT_THROW(k->maxsim(scores.view, q.view, docs.view, index_tensor({0, 1, 1}).view), Error);  // ends before Td
    EXPECT_THROW(k->maxsim(scores.view, q.view, docs.view, index_tensor({1, 1, 2}).view), Error);  // not from 0
    EXPECT_THROW(k->maxsim(scores.view, q.view, docs.view, index_tensor({0, 2, 1}).view), Error);  // descending
  }
}

}  // namespace
}  // namespace stoke
