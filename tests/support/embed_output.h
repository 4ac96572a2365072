// Synthetic `stoke embed` output folders, written exactly as
// docs/output-format.md describes them (manifest fields, shard numbering,
// record numbers and tasks, checksums of whole files), for the tests of
// `stoke verify`. Independent of the embed job: it follows the document, so a
// disagreement between verify and the document shows up as a failing test.
#pragma once

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/half.h"
#include "core/sha256.h"
#include "io/atomic_file.h"
#include "io/npy.h"

namespace stoke::test {

struct EmbedJob {
  uint64_t records = 20;           // records in the whole input
  uint64_t count = 3;              // tasks (--num-shards)
  uint64_t shard_size = 3;         // rows per shard
  int64_t dims = 4;
  std::string output_dtype = "f32";
  std::set<uint64_t> bad = {7};    // bad records, skipped into errors.jsonl
  std::string id_field;            // "" = ids are record numbers; else ids are "id-<r>" strings

  // The records of task `index` (r mod count == index), in input order.
  std::vector<uint64_t> task_records(uint64_t index) const {
    std::vector<uint64_t> out;
    for (uint64_t r = index; r < records; r += count) out.push_back(r);
    return out;
  }
};

// A value per (record, column) that is exact in f16 as well.
inline float embedding_value(uint64_t record, int64_t col) {
  return static_cast<float>(record) + 0.25f * static_cast<float>(col);
}

inline std::vector<std::byte> embedding_bytes(const std::vector<uint64_t>& rows, int64_t dims, const std::string& dtype) {
  std::vector<std::byte> out;
  for (uint64_t r : rows) {
    for (int64_t c = 0; c < dims; ++c) {
      const float v = embedding_value(r, c);
      if (dtype == "f16") {
        const f16 h = to_f16(v);
        const auto* p = reinterpret_cast<const std::byte*>(&h.bits);
        out.insert(out.end(), p, p + 2);
      } else {
        const auto* p = reinterpret_cast<const std::byte*>(&v);
        out.insert(out.end(), p, p + 4);
      }
    }
  }
  return out;
}

inline void write_embeddings(const std::filesystem::path& path, const std::vector<uint64_t>& rows, int64_t dims,
                             const std::string& dtype) {
  write_npy(path, dtype == "f16" ? DType::f16 : DType::f32, static_cast<int64_t>(rows.size()), dims,
            embedding_bytes(rows, dims, dtype));
}

inline nlohmann::json read_manifest(const std::filesystem::path& folder) {
  return nlohmann::json::parse(read_file(folder / "manifest.json"));
}

inline void write_manifest(const std::filesystem::path& folder, const nlohmann::json& m) {
  write_file_atomic(folder / "manifest.json", std::string_view(m.dump(2) + "\n"));
}

// Recomputes every listed shard's checksums from the files (after a test
// changed a file on purpose and wants only the other checks to see it).
inline void rehash(const std::filesystem::path& folder) {
  nlohmann::json m = read_manifest(folder);
  for (auto& s : m["shards"]) {
    s["embeddings_sha256"] = sha256_file(folder / s["embeddings"].get<std::string>());
    s["ids_sha256"] = sha256_file(folder / s["ids"].get<std::string>());
  }
  write_manifest(folder, m);
}

// Writes task `index`'s finished folder at `folder`, as `stoke embed
// --shard-index index --num-shards job.count` would.
inline void write_task_folder(const std::filesystem::path& folder, const EmbedJob& job, uint64_t index) {
  using nlohmann::json;
  std::filesystem::create_directories(folder);
  // Embedded rows and skipped records of this task, in input order.
  std::vector<uint64_t> rows;
  std::string errors;
  // errors.jsonl length after each record has been accounted for.
  std::vector<std::pair<uint64_t, uint64_t>> errors_bytes_at;  // (record, bytes after it)
  for (uint64_t r : job.task_records(index)) {
    if (job.bad.count(r)) {
      errors += "{\"record\": " + std::to_string(r) + ", \"file\": \"texts.jsonl\", \"line\": " + std::to_string(r + 1) +
                ", \"error\": \"text: missing field\"}\n";
    } else {
      rows.push_back(r);
    }
    errors_bytes_at.push_back({r, errors.size()});
  }
  auto errors_after = [&](uint64_t record) {
    uint64_t bytes = 0;
    for (const auto& [r, b] : errors_bytes_at)
      if (r <= record) bytes = b;
    return bytes;
  };

  json shards = json::array();
  uint64_t first_row = 0;
  for (uint64_t k = 0; first_row < rows.size(); ++k) {
    const uint64_t n = std::min<uint64_t>(job.shard_size, rows.size() - first_row);
    const std::vector<uint64_t> shard_rows(rows.begin() + static_cast<std::ptrdiff_t>(first_row),
                                           rows.begin() + static_cast<std::ptrdiff_t>(first_row + n));
    char name[64];
    std::snprintf(name, sizeof name, "embeddings-%05llu.npy", static_cast<unsigned long long>(k));
    const std::string npy = name;
    std::snprintf(name, sizeof name, "ids-%05llu.jsonl", static_cast<unsigned long long>(k));
    const std::string ids_name = name;
    write_embeddings(folder / npy, shard_rows, job.dims, job.output_dtype);
    std::string ids;
    for (uint64_t r : shard_rows) ids += (job.id_field.empty() ? std::to_string(r) : "\"id-" + std::to_string(r) + "\"") + "\n";
    write_file_atomic(folder / ids_name, std::string_view(ids));
    shards.push_back({{"index", k},
                      {"embeddings", npy},
                      {"ids", ids_name},
                      {"rows", n},
                      {"first_row", first_row},
                      {"first_record", shard_rows.front()},
                      {"last_record", shard_rows.back()},
                      {"records_after", shard_rows.back() + 1},
                      {"errors_bytes_after", errors_after(shard_rows.back())},
                      {"embeddings_sha256", sha256_file(folder / npy)},
                      {"ids_sha256", sha256_hex(ids)}});
    first_row += n;
  }
  if (!errors.empty()) write_file_atomic(folder / "errors.jsonl", std::string_view(errors));

  const uint64_t share = job.task_records(index).size();
  const uint64_t skipped = share - rows.size();
  const json& last = shards.empty() ? json(nullptr) : shards.back();
  const json manifest = {
      {"format", "stoke-embeddings"},
      {"format_version", 1},
      {"stoke_version", "0.1.0"},
      {"complete", true},
      {"model",
       {{"folder", "tiny-bert"},
        {"architecture", "BertModel"},
        {"model_type", "bert"},
        {"config_sha256", sha256_hex("config")},
        {"weights", json::array({{{"file", "model.safetensors"}, {"sha256", sha256_hex("weights")}}})}}},
      {"tokenizer", {{"source", "tokenizer.json"}, {"vocab_size", 1000}, {"sha256", sha256_hex("tokenizer")}}},
      {"pooling", "mean"},
      {"normalize", true},
      {"max_length", 128},
      {"dimensions", job.dims},
      {"prompt", ""},
      {"precision", "f32"},
      {"output_dtype", job.output_dtype},
      {"input",
       {{"name", "texts.jsonl"},
        {"format", "jsonl"},
        {"text_field", "text"},
        {"id_field", job.id_field},
        {"size", 12345},
        {"sha256", sha256_hex("input")}}},
      {"task", {{"index", index}, {"count", job.count}}},
      {"shards", shards},
      // A finished task's last commit covers the whole input, as embed writes it.
      {"committed", {{"rows", rows.size()}, {"records", job.records}, {"errors_bytes", errors.size()}}},
      {"counts",
       {{"records", job.records},
        {"texts", rows.size()},
        {"tokens", 0},
        {"truncated", 0},
        {"replaced_utf8", 0},
        {"skipped", skipped},
        {"other_tasks", job.records - share}}},
      {"settings",
       {{"batch_tokens", 16384},
        {"max_batch_size", 256},
        {"sort_window", 65536},
        {"shard_size", job.shard_size},
        {"workers", 2},
        {"device", "cpu"},
        {"threads", 2},
        {"on_error", "skip"}}},
      {"run",
       {{"seconds", 0},
        {"texts_per_second", 0},
        {"tokens_per_second", 0},
        {"batches", 0},
        {"host_syncs", 0},
        {"padding_efficiency", 1.0},
        {"stages", json::object()}}},
  };
  write_manifest(folder, manifest);
}

// Every task's folder, at root/task-<i>; returns their paths.
inline std::vector<std::string> write_job(const std::filesystem::path& root, const EmbedJob& job) {
  std::vector<std::string> folders;
  for (uint64_t i = 0; i < job.count; ++i) {
    const auto folder = root / ("task-" + std::to_string(i));
    write_task_folder(folder, job, i);
    folders.push_back(folder.string());
  }
  return folders;
}

}  // namespace stoke::test
