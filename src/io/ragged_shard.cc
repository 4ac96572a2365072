#include "io/ragged_shard.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "io/npy.h"

namespace stoke {

namespace fs = std::filesystem;

namespace {

// memcpy of a whole array's bytes; an empty one (a shard with no entry) copies nothing
// (memcpy's pointers may not be null, and an empty vector's may be).
void copy_data(void* dst, const std::vector<std::byte>& src) {
  if (!src.empty()) std::memcpy(dst, src.data(), src.size());
}

}  // namespace

RaggedShardFiles ragged_shard_files(const std::string& stem) { return {stem + ".npy", stem + ".offsets.npy"}; }

std::string colbert_shard_stem(uint64_t shard) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "colbert-%05llu", static_cast<unsigned long long>(shard));
  return buf;
}

RaggedShardWriter::RaggedShardWriter(const fs::path& dir, const std::string& stem, DType dtype, int64_t dim)
    : dir_(dir),
      names_(ragged_shard_files(stem)),
      dtype_(dtype),
      dim_(dim),
      vectors_(dir / names_.vectors, dtype == DType::f16 ? DType::f16 : DType::f32, dim < 1 ? 1 : dim) {
  if (dtype != DType::f32 && dtype != DType::f16) throw Error(Errc::invalid_argument, "multi-vectors: expected f32 or f16");
  if (dim < 1) throw Error(Errc::invalid_argument, "multi-vectors: dimension " + std::to_string(dim) + " must be positive");
}

void RaggedShardWriter::add_row(std::span<const float> vectors) {
  if (vectors.size() % static_cast<size_t>(dim_) != 0)
    throw Error(Errc::invalid_argument, "multi-vector row: " + std::to_string(vectors.size()) +
                                            " values is not a whole number of " + std::to_string(dim_) + "-wide vectors");
  for (float v : vectors)
    if (!std::isfinite(v)) throw Error(Errc::invalid_argument, "multi-vector row: a value is not finite");
  if (dtype_ == DType::f32) {
    vectors_.append(std::as_bytes(vectors));
  } else {
    scratch_.resize(vectors.size() * 2);
    for (size_t i = 0; i < vectors.size(); ++i) {
      const f16 h = to_f16(vectors[i]);
      std::memcpy(scratch_.data() + i * 2, &h.bits, 2);
    }
    vectors_.append(scratch_);
  }
  offsets_.push_back(offsets_.back() + static_cast<int64_t>(vectors.size() / static_cast<size_t>(dim_)));
}

void RaggedShardWriter::commit() {
  vectors_.commit();
  NpyStreamWriter offsets(dir_ / names_.offsets, DType::i64);
  offsets.append(std::as_bytes(std::span<const int64_t>(offsets_)));
  offsets.commit();
}

std::vector<fs::path> RaggedShardWriter::paths() const { return {dir_ / names_.vectors, dir_ / names_.offsets}; }

RaggedRows read_ragged_shard(const fs::path& dir, const std::string& stem, int64_t dim) {
  const RaggedShardFiles names = ragged_shard_files(stem);
  const fs::path vec_file = dir / names.vectors, off_file = dir / names.offsets;
  const NpyArray vec = read_npy(vec_file);
  const NpyArray off = read_npy(off_file);
  auto damaged = [](const fs::path& f, const std::string& what) { throw Error(Errc::format, f.string() + ": " + what); };
  if (vec.header.descr != "<f4" && vec.header.descr != "<f2")
    damaged(vec_file, "dtype '" + vec.header.descr + "', expected <f4 or <f2");
  if (vec.header.shape.size() != 2) damaged(vec_file, "expected a 2-D array [vectors, dim]");
  if (dim > 0 && vec.header.shape[1] != dim)
    damaged(vec_file, "vectors are " + std::to_string(vec.header.shape[1]) + " wide, expected " + std::to_string(dim));
  if (off.header.descr != "<i8") damaged(off_file, "dtype '" + off.header.descr + "', expected <i8");
  if (off.header.shape.size() != 1 || off.header.shape[0] < 1)
    damaged(off_file, "expected a 1-D array of rows + 1 offsets");
  RaggedRows r;
  r.dim = vec.header.shape[1];
  const int64_t total = vec.header.shape[0];
  r.vectors.resize(static_cast<size_t>(vec.numel()));
  if (vec.header.descr == "<f4") {
    copy_data(r.vectors.data(), vec.data);
  } else {
    for (size_t i = 0; i < r.vectors.size(); ++i) {
      f16 h;
      std::memcpy(&h.bits, vec.data.data() + i * 2, 2);
      r.vectors[i] = to_float(h);
    }
  }
  for (float v : r.vectors)
    if (!std::isfinite(v)) damaged(vec_file, "a value is not finite");
  r.offsets.resize(static_cast<size_t>(off.header.shape[0]));
  copy_data(r.offsets.data(), off.data);
  if (r.offsets.front() != 0) damaged(off_file, "offsets[0] is " + std::to_string(r.offsets.front()) + ", expected 0");
  for (size_t i = 1; i < r.offsets.size(); ++i)
    if (r.offsets[i] < r.offsets[i - 1]) damaged(off_file, "offsets decrease at row " + std::to_string(i - 1));
  if (r.offsets.back() != total)
    damaged(off_file, "the last offset is " + std::to_string(r.offsets.back()) + ", expected the " +
                          std::to_string(total) + " vectors of " + vec_file.filename().string());
  return r;
}

}  // namespace stoke
