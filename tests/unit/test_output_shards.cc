// The sparse (CSR) and multi-vector (ragged) shard files (io/csr_shard.h,
// io/ragged_shard.h): what is written reads back exactly (f32) or as f16
// rounds it; a refused row leaves the shard as it was; nothing appears under
// a shard's names before commit and no temp file stays after it; damaged
// files (cut short, offsets that do not add up, ids out of order) are
// refused naming the file; and numpy + scipy alone read the files as
// docs/output-format.md says (tests/support/read_shards.py, run with the
// first Python that has numpy: $STOKE_SCIPY_PYTHON, /usr/bin/python3, python3).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/half.h"
#include "io/atomic_file.h"
#include "io/csr_shard.h"
#include "io/npy.h"
#include "io/ragged_shard.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;

fs::path fresh(const std::string& name) {
  const fs::path dir = test::scratch_dir("shards-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

size_t temp_files(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += is_temp_name(e.path()) ? 1 : 0;
  return n;
}

struct SparseRow {
  std::vector<int32_t> ids;
  std::vector<float> values;
};
const std::vector<SparseRow> kRows = {
    {{3, 17, 250}, {0.5f, 1.25f, 0.0625f}},
    {{}, {}},  // a text of special tokens only
    {{0, 1, 299}, {2.0f, 0.001f, 3.5f}},
};

TEST(NpyHeader, OneDimensionalIntegerArraysAreSpelledAsNumpySpellsThem) {
  const int64_t shape[] = {5};
  const NpyHeader h = parse_npy_header(npy_header(DType::i64, std::span<const int64_t>(shape)));
  EXPECT_EQ(h.descr, "<i8");
  EXPECT_EQ(h.shape, (std::vector<int64_t>{5}));
  EXPECT_EQ(npy_header(DType::i32, std::span<const int64_t>(shape)).size() % 64, 0u);
  EXPECT_EQ(parse_npy_header(npy_header(DType::i32, std::span<const int64_t>(shape))).descr, "<i4");
  EXPECT_THROW(npy_header(DType::i32, 2, 3), Error);  // the 2-D writer stays float-only
}

TEST(CsrShard, RoundTripsAndRefusedRowsLeaveItUnchanged) {
  for (const DType dt : {DType::f32, DType::f16}) {
    const fs::path dir = fresh(dt == DType::f32 ? "csr32" : "csr16");
    CsrShardWriter w(dir, sparse_shard_stem(7), dt, 300);
    for (const SparseRow& r : kRows) w.add_row(r.ids, r.values);
    const std::vector<int32_t> unsorted = {5, 4}, dup = {5, 5}, outside = {300};
    const std::vector<float> two = {1, 1}, one = {1}, nan = {std::nanf("")};
    EXPECT_THROW(w.add_row(unsorted, two), Error);
    EXPECT_THROW(w.add_row(dup, two), Error);
    EXPECT_THROW(w.add_row(outside, one), Error);
    EXPECT_THROW(w.add_row(std::vector<int32_t>{5}, nan), Error);
    EXPECT_THROW(w.add_row(std::vector<int32_t>{5}, two), Error);
    EXPECT_EQ(w.rows(), 3u);
    EXPECT_EQ(w.nnz(), 6u);
    EXPECT_FALSE(fs::exists(dir / "sparse-00007.indices.npy"));  // nothing under its names before commit
    w.commit();
    EXPECT_EQ(temp_files(dir), 0u);
    const CsrRows back = read_csr_shard(dir, "sparse-00007", 300);
    EXPECT_EQ(back.indptr, (std::vector<int64_t>{0, 3, 3, 6}));
    EXPECT_EQ(back.indices, (std::vector<int32_t>{3, 17, 250, 0, 1, 299}));
    size_t k = 0;
    for (const SparseRow& r : kRows)
      for (float v : r.values) {
        const float want = dt == DType::f32 ? v : to_float(to_f16(v));
        EXPECT_EQ(back.values[k++], want);
      }
    EXPECT_EQ(read_npy_header(dir / "sparse-00007.values.npy").descr, dt == DType::f32 ? "<f4" : "<f2");
  }
}

TEST(CsrShard, AnUncommittedShardLeavesNothing) {
  const fs::path dir = fresh("csr-abandoned");
  {
    CsrShardWriter w(dir, sparse_shard_stem(0), DType::f32, 10);
    w.add_row(std::vector<int32_t>{1}, std::vector<float>{1});
  }
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(CsrShard, AnEmptyShardIsValid) {
  const fs::path dir = fresh("csr-empty");
  CsrShardWriter w(dir, sparse_shard_stem(0), DType::f32, 10);
  w.commit();
  const CsrRows back = read_csr_shard(dir, "sparse-00000");
  EXPECT_EQ(back.rows(), 0u);
  EXPECT_EQ(back.indptr, (std::vector<int64_t>{0}));
}

// Rewrites one .npy file of a shard with other contents (the damage).
void rewrite(const fs::path& file, DType dt, const std::vector<int64_t>& shape, const void* data, size_t bytes,
             size_t cut = 0) {
  std::string out = npy_header(dt, std::span<const int64_t>(shape));
  out.append(static_cast<const char*>(data), bytes - cut);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << out;
}

std::string read_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::format);
    return e.what();
  }
  return "";
}

TEST(CsrShard, DamagedFilesAreRefusedNamingTheFile) {
  auto write = [](const std::string& name) {
    const fs::path dir = fresh(name);
    CsrShardWriter w(dir, "sparse-00000", DType::f32, 300);
    for (const SparseRow& r : kRows) w.add_row(r.ids, r.values);
    w.commit();
    return dir;
  };
  {
    const fs::path dir = write("csr-cut");
    const std::vector<float> v = {1, 2, 3, 4, 5, 6};
    rewrite(dir / "sparse-00000.values.npy", DType::f32, {6}, v.data(), 24, /*cut=*/4);
    const std::string msg = read_error([&] { read_csr_shard(dir, "sparse-00000"); });
    EXPECT_NE(msg.find("sparse-00000.values.npy"), std::string::npos) << msg;
  }
  {
    const fs::path dir = write("csr-indptr");
    const std::vector<int64_t> p = {0, 3, 3, 5};
    rewrite(dir / "sparse-00000.indptr.npy", DType::i64, {4}, p.data(), 32);
    const std::string msg = read_error([&] { read_csr_shard(dir, "sparse-00000"); });
    EXPECT_NE(msg.find("sparse-00000.indptr.npy: the last offset is 5, expected nnz = 6"), std::string::npos) << msg;
  }
  {
    const fs::path dir = write("csr-order");
    const std::vector<int32_t> ids = {3, 250, 17, 0, 1, 299};
    rewrite(dir / "sparse-00000.indices.npy", DType::i32, {6}, ids.data(), 24);
    const std::string msg = read_error([&] { read_csr_shard(dir, "sparse-00000"); });
    EXPECT_NE(msg.find("sparse-00000.indices.npy: row 0: ids are not strictly ascending"), std::string::npos) << msg;
  }
  {
    const fs::path dir = write("csr-vocab");
    const std::string msg = read_error([&] { read_csr_shard(dir, "sparse-00000", 250); });
    EXPECT_NE(msg.find("id 250 outside the vocabulary"), std::string::npos) << msg;
  }
}

const int64_t kDim = 3;
const std::vector<std::vector<float>> kVectors = {
    {1, 0, 0, 0, 0.6f, 0.8f},  // 2 vectors
    {0, 0, 1},                 // 1 (an empty text: its EOS)
    {},                        // 0
    {0.5f, 0.5f, 0.70710677f, -1, 0, 0, 0, -0.25f, 0.96824586f},
};

TEST(RaggedShard, RoundTripsAndRefusedRowsLeaveItUnchanged) {
  for (const DType dt : {DType::f32, DType::f16}) {
    const fs::path dir = fresh(dt == DType::f32 ? "ragged32" : "ragged16");
    RaggedShardWriter w(dir, colbert_shard_stem(2), dt, kDim);
    for (const auto& r : kVectors) w.add_row(r);
    EXPECT_THROW(w.add_row(std::vector<float>{1, 2}), Error);  // not a whole vector
    EXPECT_THROW(w.add_row(std::vector<float>{1, INFINITY, 0}), Error);
    EXPECT_EQ(w.rows(), 4u);
    EXPECT_EQ(w.total_vectors(), 6u);
    EXPECT_FALSE(fs::exists(dir / "colbert-00002.npy"));
    w.commit();
    EXPECT_EQ(temp_files(dir), 0u);
    const RaggedRows back = read_ragged_shard(dir, "colbert-00002", kDim);
    EXPECT_EQ(back.offsets, (std::vector<int64_t>{0, 2, 3, 3, 6}));
    size_t k = 0;
    for (const auto& r : kVectors)
      for (float v : r) EXPECT_EQ(back.vectors[k++], dt == DType::f32 ? v : to_float(to_f16(v)));
  }
}

TEST(RaggedShard, DamagedOffsetsAreRefusedNamingTheFile) {
  const fs::path dir = fresh("ragged-damaged");
  RaggedShardWriter w(dir, "colbert-00000", DType::f32, kDim);
  for (const auto& r : kVectors) w.add_row(r);
  w.commit();
  const std::vector<int64_t> decreasing = {0, 2, 1, 3, 6};
  rewrite(dir / "colbert-00000.offsets.npy", DType::i64, {5}, decreasing.data(), 40);
  std::string msg = read_error([&] { read_ragged_shard(dir, "colbert-00000"); });
  EXPECT_NE(msg.find("colbert-00000.offsets.npy: offsets decrease at row 1"), std::string::npos) << msg;
  const std::vector<int64_t> short_end = {0, 2, 3, 3, 5};
  rewrite(dir / "colbert-00000.offsets.npy", DType::i64, {5}, short_end.data(), 40);
  msg = read_error([&] { read_ragged_shard(dir, "colbert-00000"); });
  EXPECT_NE(msg.find("the last offset is 5, expected the 6 vectors"), std::string::npos) << msg;
  msg = read_error([&] { read_ragged_shard(dir, "colbert-00000", 4); });
  EXPECT_NE(msg.find("vectors are 3 wide, expected 4"), std::string::npos) << msg;
}

// The first Python with numpy, or "".
std::string python_with_numpy() {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("STOKE_SCIPY_PYTHON")) candidates.push_back(p);
  candidates.push_back("/usr/bin/python3");
  candidates.push_back("python3");
  for (const std::string& py : candidates)
    if (std::system(("'" + py + "' -c 'import numpy' >/dev/null 2>&1").c_str()) == 0) return py;
  return "";
}

TEST(OutputShards, NumpyAndScipyReadThemWithoutStoke) {
  const std::string py = python_with_numpy();
  if (py.empty())
    GTEST_SKIP() << "no Python with numpy (scripts/setup.sh installs python3-numpy and python3-scipy): the read-back did not run";
  const fs::path dir = fresh("python");
  nlohmann::json expected = {{"vocab", 300}, {"sparse_stem", "sparse-00000"}, {"colbert_stem", "colbert-00000"},
                             {"dim", kDim}, {"tol", 1e-3}};  // f16 values: within 2^-11 relative
  CsrShardWriter csr(dir, "sparse-00000", DType::f16, 300);
  nlohmann::json rows = nlohmann::json::array();
  for (const SparseRow& r : kRows) {
    csr.add_row(r.ids, r.values);
    nlohmann::json row = nlohmann::json::array();
    for (size_t i = 0; i < r.ids.size(); ++i) row.push_back({r.ids[i], r.values[i]});
    rows.push_back(row);
  }
  csr.commit();
  expected["sparse_rows"] = rows;
  RaggedShardWriter rag(dir, "colbert-00000", DType::f32, kDim);
  for (const auto& r : kVectors) rag.add_row(r);
  rag.commit();
  expected["colbert_rows"] = kVectors;
  std::ofstream(dir / "expected.json") << expected.dump();
  const std::string cmd = "'" + py + "' " + (test::source_dir() / "tests/support/read_shards.py").string() + " " +
                          dir.string() + " " + (dir / "expected.json").string() + " >" + (dir / "out.txt").string() +
                          " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream out_file(dir / "out.txt");
  const std::string out((std::istreambuf_iterator<char>(out_file)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(WIFEXITED(rc)) << out;
  if (WEXITSTATUS(rc) == 78) GTEST_SKIP() << py << " has numpy but not scipy: " << out;
  EXPECT_EQ(WEXITSTATUS(rc), 0) << py << ": " << out;
}

}  // namespace
}  // namespace stoke
