#include "io/csr_shard.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "io/npy.h"

namespace stoke {

namespace fs = std::filesystem;

CsrShardFiles csr_shard_files(const std::string& stem) {
  return {stem + ".indices.npy", stem + ".values.npy", stem + ".indptr.npy"};
}

std::string sparse_shard_stem(uint64_t shard) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "sparse-%05llu", static_cast<unsigned long long>(shard));
  return buf;
}

CsrShardWriter::CsrShardWriter(const fs::path& dir, const std::string& stem, DType values_dtype, int64_t columns)
    : dir_(dir),
      names_(csr_shard_files(stem)),
      values_dtype_(values_dtype),
      columns_(columns),
      indices_(dir / names_.indices, DType::i32),
      values_(dir / names_.values, values_dtype == DType::f16 ? DType::f16 : DType::f32) {
  if (values_dtype != DType::f32 && values_dtype != DType::f16)
    throw Error(Errc::invalid_argument, "sparse values: expected f32 or f16");
  if (columns <= 0 || columns > INT32_MAX)
    throw Error(Errc::invalid_argument, "sparse shard: vocabulary size " + std::to_string(columns) +
                                            " out of range [1, 2147483647]");
}

void CsrShardWriter::add_row(std::span<const int32_t> ids, std::span<const float> values) {
  if (ids.size() != values.size())
    throw Error(Errc::invalid_argument, "sparse row: " + std::to_string(ids.size()) + " ids but " +
                                            std::to_string(values.size()) + " values");
  // Checked whole before any byte is written, so a refused row leaves the shard as it was.
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= columns_)
      throw Error(Errc::invalid_argument, "sparse row: id " + std::to_string(ids[i]) + " outside the vocabulary [0, " +
                                              std::to_string(columns_) + ")");
    if (i > 0 && ids[i] <= ids[i - 1])
      throw Error(Errc::invalid_argument, "sparse row: ids must be strictly ascending (" + std::to_string(ids[i - 1]) +
                                              " then " + std::to_string(ids[i]) + ")");
    if (!std::isfinite(values[i]))
      throw Error(Errc::invalid_argument, "sparse row: the weight of id " + std::to_string(ids[i]) + " is not finite");
  }
  indices_.append(std::as_bytes(ids));
  if (values_dtype_ == DType::f32) {
    values_.append(std::as_bytes(values));
  } else {
    scratch_.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      const f16 h = to_f16(values[i]);
      std::memcpy(scratch_.data() + i * 2, &h.bits, 2);
    }
    values_.append(scratch_);
  }
  indptr_.push_back(indptr_.back() + static_cast<int64_t>(ids.size()));
}

void CsrShardWriter::commit() {
  indices_.commit();
  values_.commit();
  NpyStreamWriter indptr(dir_ / names_.indptr, DType::i64);
  indptr.append(std::as_bytes(std::span<const int64_t>(indptr_)));
  indptr.commit();
}

std::vector<fs::path> CsrShardWriter::paths() const {
  return {dir_ / names_.indices, dir_ / names_.values, dir_ / names_.indptr};
}

namespace {

// memcpy of a whole array's bytes; an empty one (a shard with no entry) copies nothing
// (memcpy's pointers may not be null, and an empty vector's may be).
void copy_data(void* dst, const std::vector<std::byte>& src) {
  if (!src.empty()) std::memcpy(dst, src.data(), src.size());
}

[[noreturn]] void damaged(const fs::path& file, const std::string& what) {
  throw Error(Errc::format, file.string() + ": " + what);
}

// The array of `file`, which must be 1-D with one of the descrs given.
NpyArray read_vector(const fs::path& file, std::initializer_list<const char*> descrs) {
  NpyArray a = read_npy(file);
  bool ok = false;
  std::string want;
  for (const char* d : descrs) {
    ok = ok || a.header.descr == d;
    want += (want.empty() ? "" : " or ") + std::string(d);
  }
  if (!ok) damaged(file, "dtype '" + a.header.descr + "', expected " + want);
  if (a.header.shape.size() != 1) damaged(file, "expected a 1-D array, the header says " + std::to_string(a.header.shape.size()) + "-D");
  return a;
}

}  // namespace

CsrRows read_csr_shard(const fs::path& dir, const std::string& stem, int64_t columns) {
  const CsrShardFiles names = csr_shard_files(stem);
  const fs::path ind_file = dir / names.indices, val_file = dir / names.values, ptr_file = dir / names.indptr;
  const NpyArray ind = read_vector(ind_file, {"<i4"});
  const NpyArray val = read_vector(val_file, {"<f4", "<f2"});
  const NpyArray ptr = read_vector(ptr_file, {"<i8"});
  const int64_t nnz = ind.header.shape[0];
  if (val.header.shape[0] != nnz)
    damaged(val_file, std::to_string(val.header.shape[0]) + " values for " + std::to_string(nnz) + " indices");
  if (ptr.header.shape[0] < 1) damaged(ptr_file, "empty (it holds rows + 1 offsets, at least one)");
  CsrRows r;
  r.indices.resize(static_cast<size_t>(nnz));
  copy_data(r.indices.data(), ind.data);
  r.indptr.resize(static_cast<size_t>(ptr.header.shape[0]));
  copy_data(r.indptr.data(), ptr.data);
  r.values.resize(static_cast<size_t>(nnz));
  if (val.header.descr == "<f4") {
    copy_data(r.values.data(), val.data);
  } else {
    for (size_t i = 0; i < r.values.size(); ++i) {
      f16 h;
      std::memcpy(&h.bits, val.data.data() + i * 2, 2);
      r.values[i] = to_float(h);
    }
  }
  if (r.indptr.front() != 0) damaged(ptr_file, "indptr[0] is " + std::to_string(r.indptr.front()) + ", expected 0");
  if (r.indptr.back() != nnz)
    damaged(ptr_file, "the last offset is " + std::to_string(r.indptr.back()) + ", expected nnz = " + std::to_string(nnz));
  for (size_t row = 0; row + 1 < r.indptr.size(); ++row) {
    const int64_t begin = r.indptr[row], end = r.indptr[row + 1];
    if (end < begin || end > nnz)
      damaged(ptr_file, "row " + std::to_string(row) + " spans [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
    for (int64_t i = begin; i < end; ++i) {
      const int32_t id = r.indices[static_cast<size_t>(i)];
      if (id < 0 || (columns > 0 && id >= columns))
        damaged(ind_file, "row " + std::to_string(row) + ": id " + std::to_string(id) + " outside the vocabulary");
      if (i > begin && id <= r.indices[static_cast<size_t>(i) - 1])
        damaged(ind_file, "row " + std::to_string(row) + ": ids are not strictly ascending");
      if (!std::isfinite(r.values[static_cast<size_t>(i)]))
        damaged(val_file, "row " + std::to_string(row) + ": a weight is not finite");
    }
  }
  return r;
}

}  // namespace stoke
