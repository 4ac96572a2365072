#include "jobs/embed_output.h"

#include <unistd.h>

#include <algorithm>
#include <set>
#include <system_error>

#include "core/error.h"
#include "core/file_util.h"
#include "core/sha256.h"
#include "io/atomic_file.h"
#include "io/folder_lock.h"
#include "io/csr_shard.h"
#include "io/ragged_shard.h"
#include "pipeline/batch_journal.h"

namespace stoke {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

// What makes a folder "hold output": anything embed writes, or anything that
// looks like it (DESIGN: nothing else in an output folder ends in .npy).
bool is_output_file(const fs::path& p) {
  const std::string name = p.filename().string();
  return name == "manifest.json" || name == kErrorsFileName || p.extension() == ".npy" ||
         (name.rfind("ids-", 0) == 0 && p.extension() == ".jsonl") || is_temp_name(p) || is_partial_rows_name(p);
}

bool numbered(const std::string& name, std::string_view prefix, std::string_view suffix) {
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix)) return false;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The sparse and ColBERT files of shard `i` (io/csr_shard.h, io/ragged_shard.h).
std::vector<std::string> extra_shard_names(uint64_t i) {
  const CsrShardFiles sparse = csr_shard_files(sparse_shard_stem(i));
  const RaggedShardFiles colbert = ragged_shard_files(colbert_shard_stem(i));
  return {sparse.indices, sparse.values, sparse.indptr, colbert.vectors, colbert.offsets};
}

bool is_extra_shard_name(const std::string& name) {
  for (const char* suffix : {".indices.npy", ".values.npy", ".indptr.npy"})
    if (numbered(name, "sparse-", suffix)) return true;
  return numbered(name, "colbert-", ".npy") || numbered(name, "colbert-", ".offsets.npy");
}

// Names embed itself writes (docs/output-format.md) and its temp files: what
// a resume may clear. A user's own .npy beside them is not among them.
bool is_embed_name(const fs::path& p) {
  const std::string name = p.filename().string();
  return name == "manifest.json" || name == kErrorsFileName || is_temp_name(p) || is_partial_rows_name(p) ||
         numbered(name, "embeddings-", ".npy") || numbered(name, "ids-", ".jsonl") || is_extra_shard_name(name);
}

std::vector<fs::path> files_where(const fs::path& dir, bool (*keep)(const fs::path&)) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(dir))
    if (!is_folder_lock_name(entry.path()) && keep(entry.path())) found.push_back(entry.path());
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<fs::path> output_files(const fs::path& dir) { return files_where(dir, is_output_file); }
std::vector<fs::path> embed_files(const fs::path& dir) { return files_where(dir, is_embed_name); }

// What --overwrite may remove (RELIABILITY 14): the files the previous
// manifest names (its shards' embeddings and ids, the errors file, the
// manifest itself) and stoke's temp files, plus the one shard pair just past
// the manifest's last — a kill between a shard's rename and the manifest
// that names it leaves that pair (pipeline/shard_writer.h), and without a
// manifest that is shard 0. Anything else in the folder is refused, named,
// before anything is removed.
std::vector<fs::path> files_to_overwrite(const fs::path& dir, const std::string& where) {
  std::set<std::string> named = {kErrorsFileName};
  uint64_t shards = 0;
  const fs::path manifest_path = dir / "manifest.json";
  std::error_code ec;
  if (fs::exists(manifest_path, ec)) {
    try {
      const json previous = json::parse(read_file(manifest_path));
      if (previous.value("format", "") != "stoke-embeddings") throw Error(Errc::format, "not a stoke-embeddings manifest");
      shards = previous.at("shards").size();
    } catch (const std::exception& e) {
      throw Error(Errc::refused, where + ": --overwrite removes only what a stoke manifest names, and " +
                                     manifest_path.string() + " cannot be read as one (" + e.what() +
                                     "); empty the folder yourself or use another");
    }
    named.insert("manifest.json");
  }
  for (uint64_t i = 0; i <= shards; ++i) {
    named.insert(embeddings_file_name(i));
    named.insert(ids_file_name(i));
    for (const std::string& extra : extra_shard_names(i)) named.insert(extra);
  }
  std::vector<fs::path> remove;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const fs::path& p = entry.path();
    if (is_folder_lock_name(p)) continue;
    if (is_temp_name(p) || is_partial_rows_name(p) || named.count(p.filename().string())) {
      remove.push_back(p);
      continue;
    }
    throw Error(Errc::refused, where + " holds " + p.filename().string() +
                                   ", which no previous stoke run wrote there; --overwrite removes only what the "
                                   "previous run's manifest names: move it away or use another folder");
  }
  return remove;
}

std::string short_json(const json& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// Every identity field that differs, each as "pooling differs (the output
// has "mean", this run has "cls")".
std::vector<std::string> differences(const json& previous, const json& now) {
  std::vector<std::string> found;
  for (const std::string& field : embed_identity_fields()) {
    const json::json_pointer ptr(field);
    const json a = previous.contains(ptr) ? previous.at(ptr) : json();
    const json b = now.contains(ptr) ? now.at(ptr) : json();
    if (a != b)
      found.push_back(field.substr(1) + " differs (the output has " + short_json(a) + ", this run has " +
                      short_json(b) + ")");
  }
  return found;
}

bool shard_intact(const fs::path& dir, const ShardEntry& s, std::string* why) {
  // Every file with its checksum: embeddings (a run without dense rows has none), ids, the extras.
  std::vector<ShardFile> files = s.files;
  files.push_back({ids_file_name(s.index), s.ids_sha256});
  if (!s.embeddings_sha256.empty()) files.push_back({embeddings_file_name(s.index), s.embeddings_sha256});
  for (const ShardFile& f : files) {
    std::error_code ec;
    if (!fs::is_regular_file(dir / f.name, ec)) return *why = f.name + " is missing", false;
    if (sha256_file(dir / f.name) != f.sha256) return *why = f.name + " does not match its checksum", false;
  }
  return true;
}

}  // namespace

const std::vector<std::string>& embed_identity_fields() {
  static const std::vector<std::string> fields = {
      "/model/config_sha256", "/model/weights",    "/tokenizer/sha256",        "/pooling",
      "/normalize",           "/max_length",       "/dimensions",              "/prompt",
      "/precision",           "/device",           "/output_dtype",
      // Before the input's fingerprint, which the partition changes: name the cause.
      "/task/partition",      "/input/format",            "/input/text_field",
      "/input/id_field",      "/ids",              "/input/size",       "/input/sha256",            "/task/index",
      "/task/count",          "/settings/batch_tokens", "/settings/max_batch_size", "/settings/sort_window",
      "/settings/shard_size",
      // Chunked runs (absent otherwise): what a row is.
      "/chunking",
      // Sparse / ColBERT outputs (absent for dense-only runs): what a row gives.
      "/outputs",
      // Several input files (absent for one): every file's name and size.
      "/input/listing_sha256"};
  return fields;
}

json shards_to_json(const std::vector<ShardEntry>& shards) {
  json out = json::array();
  for (const ShardEntry& s : shards) {
    json entry = {{"index", s.index},
                   {"embeddings", s.embeddings_sha256.empty() ? json() : json(embeddings_file_name(s.index))},
                   {"ids", ids_file_name(s.index)},
                   {"rows", s.rows},
                   {"first_row", s.first_row},
                   {"first_record", s.first_record},
                   {"last_record", s.last_record},
                   {"records_after", s.records_after},
                   {"errors_bytes_after", s.errors_bytes_after},
                   {"skipped_after", s.skipped_after},
                   {"tokens", s.tokens},
                   {"truncated", s.truncated},
                   {"replaced_utf8", s.replaced_utf8},
                   {"embeddings_sha256", s.embeddings_sha256.empty() ? json() : json(s.embeddings_sha256)},
                   {"ids_sha256", s.ids_sha256}};
    // The sparse / ColBERT files, only when the run writes them.
    if (!s.files.empty()) {
      json files = json::array();
      for (const ShardFile& f : s.files) files.push_back({{"name", f.name}, {"sha256", f.sha256}});
      entry["files"] = std::move(files);
    }
    out.push_back(std::move(entry));
  }
  return out;
}

std::vector<ShardEntry> shards_from_json(const json& shards) {
  std::vector<ShardEntry> out;
  for (const json& j : shards) {
    ShardEntry s;
    s.index = j.at("index").get<uint64_t>();
    s.rows = j.at("rows").get<uint64_t>();
    s.first_row = j.at("first_row").get<uint64_t>();
    s.first_record = j.at("first_record").get<uint64_t>();
    s.last_record = j.at("last_record").get<uint64_t>();
    s.records_after = j.at("records_after").get<uint64_t>();
    s.errors_bytes_after = j.at("errors_bytes_after").get<uint64_t>();
    s.skipped_after = j.at("skipped_after").get<uint64_t>();
    s.tokens = j.at("tokens").get<uint64_t>();
    s.truncated = j.at("truncated").get<uint64_t>();
    s.replaced_utf8 = j.at("replaced_utf8").get<uint64_t>();
    s.embeddings_sha256 = j.at("embeddings_sha256").is_null() ? "" : j.at("embeddings_sha256").get<std::string>();
    if (j.contains("files"))
      for (const json& f : j.at("files")) s.files.push_back({f.at("name").get<std::string>(), f.at("sha256").get<std::string>()});
    s.ids_sha256 = j.at("ids_sha256").get<std::string>();
    if (s.index != out.size()) throw Error(Errc::format, "shard " + std::to_string(s.index) + " is out of order");
    out.push_back(std::move(s));
  }
  return out;
}

json committed_counts(const CommitPoint& point) {
  uint64_t tokens = 0, truncated = 0, replaced = 0;
  for (const ShardEntry& s : point.shards) {
    tokens += s.tokens;
    truncated += s.truncated;
    replaced += s.replaced_utf8;
  }
  return {{"texts", point.rows}, {"tokens", tokens}, {"truncated", truncated}, {"replaced_utf8", replaced},
          {"skipped", point.skipped}};
}

namespace {

// The manifest a resumed run continues, and what it committed. Throws
// Error(format) for anything that is not a readable stoke-embeddings manifest.
CommitPoint read_previous_manifest(const fs::path& manifest_path, json& previous) {
  CommitPoint committed;
  try {
    previous = json::parse(read_file(manifest_path));
    if (previous.value("format", "") != "stoke-embeddings" || previous.value("format_version", 0) != 1)
      throw Error(Errc::format, "not a stoke-embeddings manifest (format version 1)");
    committed.shards = shards_from_json(previous.at("shards"));
    committed.complete = previous.at("complete").get<bool>();
  } catch (const std::exception& e) {
    throw Error(Errc::format, manifest_path.string() + ": cannot resume from it (" + e.what() +
                                  "); --overwrite starts again");
  }
  return committed;
}

// Resuming must not mix vector spaces: any identity field that differs is
// refused, every one named.
void check_same_identity(const fs::path& dir, const json& previous, const json& manifest) {
  const std::vector<std::string> diff = differences(previous, manifest);
  if (diff.empty()) return;
  std::string list;
  for (const std::string& d : diff) list += (list.empty() ? "" : "; ") + d;
  throw Error(Errc::refused, "--resume " + dir.string() + ": " + std::to_string(diff.size()) +
                                 (diff.size() == 1 ? " setting differs from the output's: " : " settings differ from the output's: ") +
                                 list +
                                 ". Resuming would mix vector spaces or batches: give only --output and --resume "
                                 "(the output's manifest has its settings), use the same settings, or another "
                                 "--output folder");
}

// Trust only shards whose files are intact; redo from the first that is not.
// Then the totals the kept shards (or, for a complete output, the manifest) commit.
void keep_intact_shards(const fs::path& dir, const json& previous, CommitPoint& committed, EmbedOutputStart& start) {
  for (size_t i = 0; i < committed.shards.size(); ++i) {
    std::string why;
    if (!shard_intact(dir, committed.shards[i], &why)) {
      start.notes.push_back("shard " + std::to_string(i) + ": " + why + "; redoing it and the " +
                            std::to_string(committed.shards.size() - i - 1) + " after it");
      committed.shards.resize(i);
      committed.complete = false;
      break;
    }
  }
  for (const ShardEntry& s : committed.shards) committed.rows += s.rows;
  if (!committed.shards.empty()) {
    committed.records = committed.shards.back().records_after;
    committed.errors_bytes = committed.shards.back().errors_bytes_after;
    committed.skipped = committed.shards.back().skipped_after;
  }
  if (committed.complete) {
    // A complete output whose last commit had no shard of its own (trailing
    // bad records, or rows ending on a shard boundary) records its own totals.
    const json& c = previous.at("committed");
    committed.records = c.at("records").get<uint64_t>();
    committed.errors_bytes = c.at("errors_bytes").get<uint64_t>();
    committed.skipped = previous.at("counts").at("skipped").get<uint64_t>();
    start.already_complete = true;
  }
}

// Clears what was not committed: temp files, shards past the committed ones,
// errors past the committed length.
void clear_uncommitted(const fs::path& dir, const CommitPoint& committed) {
  for (const auto& p : embed_files(dir)) {
    const std::string name = p.filename().string();
    if (name == "manifest.json") continue;
    if (name == kErrorsFileName) {
      if (committed.errors_bytes == 0) {
        fs::remove(p);
      } else if (fs::file_size(p) != committed.errors_bytes) {
        if (fs::file_size(p) < committed.errors_bytes)
          throw Error(Errc::format, p.string() + " is shorter than the manifest committed; --overwrite starts again");
        fs::resize_file(p, committed.errors_bytes);
      }
      continue;
    }
    if (is_partial_rows_name(p)) continue;  // finished batches' rows: the pipeline checks and takes them
    bool keep = false;
    for (const ShardEntry& s : committed.shards) {
      keep = keep || name == embeddings_file_name(s.index) || name == ids_file_name(s.index);
      for (const ShardFile& f : s.files) keep = keep || name == f.name;
    }
    if (!keep) fs::remove(p);
  }
  fsync_directory(dir);
}

// --resume: continue what the manifest committed, or start afresh without one.
EmbedOutputStart resume_embed_output(const fs::path& dir, const json& manifest) {
  EmbedOutputStart start;
  const fs::path manifest_path = dir / "manifest.json";
  std::error_code ec;
  if (!fs::exists(manifest_path, ec)) {
    // Killed before its first commit: nothing here was committed.
    for (const auto& p : embed_files(dir)) fs::remove(p);
    start.notes.push_back("no manifest in " + dir.string() + ": starting from the beginning");
    return start;
  }
  json previous;
  CommitPoint committed = read_previous_manifest(manifest_path, previous);
  check_same_identity(dir, previous, manifest);
  keep_intact_shards(dir, previous, committed, start);
  clear_uncommitted(dir, committed);
  if (previous.contains("quality")) start.quality = previous["quality"];
  start.committed = std::move(committed);
  start.resumed = true;
  return start;
}

}  // namespace

EmbedOutputStart prepare_embed_output(const fs::path& dir, bool resume, bool overwrite, const json& manifest) {
  const std::string where = "--output " + dir.string();
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error(Errc::invalid_argument, where + ": is a file (expected a folder)");
  fs::create_directories(dir, ec);
  if (ec) throw Error(Errc::io, where + ": cannot create the folder: " + ec.message());
  if (overwrite) {
    for (const auto& p : files_to_overwrite(dir, where)) fs::remove(p);
    return {};
  }
  if (resume) return resume_embed_output(dir, manifest);
  const std::vector<fs::path> existing = output_files(dir);
  if (!existing.empty()) {
    json previous;
    try {
      previous = json::parse(read_file(dir / "manifest.json"));
    } catch (const std::exception&) {
    }
    if (previous.is_object() && previous.value("format", "") == "stoke-embeddings" &&
        !previous.value("complete", true))
      throw Error(Errc::refused, where + " holds an unfinished run (" +
                                     std::to_string(previous.value("committed", json::object()).value("rows", 0)) +
                                     " rows committed): go on with `stoke embed --output " + dir.string() +
                                     " --resume` (its settings come from the manifest), or --overwrite starts again");
    throw Error(Errc::refused, where + " already holds output (" + existing.front().filename().string() +
                                   (previous.is_object() && previous.value("complete", false) ? ", a complete run" : "") +
                                   "); --resume continues it, --overwrite replaces it");
  }
  return {};
}

}  // namespace stoke
