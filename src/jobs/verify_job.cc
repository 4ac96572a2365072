#include "jobs/verify_job.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>

#include "core/error.h"
#include "core/file_util.h"
#include "core/sha256.h"
#include "io/atomic_file.h"
#include "io/csr_shard.h"
#include "io/npy.h"
#include "io/ragged_shard.h"
#include "pipeline/batch_journal.h"

namespace stoke {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr std::string_view kFormat = "stoke-embeddings";
constexpr uint64_t kFormatVersion = 1;
// Per file, how many line-level problems are spelled out before "and N more".
constexpr size_t kMaxLineProblems = 3;

struct Shard {
  uint64_t index = 0, rows = 0, first_row = 0, first_record = 0, last_record = 0, records_after = 0,
           errors_bytes_after = 0;
  std::string embeddings, ids, embeddings_sha256, ids_sha256;  // embeddings "": a run without dense rows
  std::vector<std::pair<std::string, std::string>> files;        // sparse / ColBERT files: name, sha256
};

// One folder's manifest, read and type-checked.
struct Folder {
  std::string name;  // as the user gave it, for messages
  fs::path path;
  json manifest;
  bool readable = false;  // manifest parsed and every field has its type
  bool complete = false;
  uint64_t task_index = 0, task_count = 1;
  // The task's share of the records it read: r mod rec_count == rec_index.
  // Under --partition files the task read only its own files, numbered from
  // 0 across them, and every record it read is its own (0 of 1).
  bool files_partition = false;
  uint64_t rec_index = 0, rec_count = 1;
  uint64_t dimensions = 0;
  std::string output_dtype, id_field;
  // "ids": "file_record" (--partition files without --id-field): each id is
  // {"file": its file's name, "record": its number within that file}; the
  // task's own files by name, in reading order (their place in the listing).
  bool file_record_ids = false;
  std::map<std::string, uint64_t> own_file_order;
  // A chunked run with a row per chunk (the manifest's "chunking", pool
  // "none"): ids lines are chunk objects, a record's rows one after another
  // in one shard (docs/output-format.md "Chunked runs").
  bool chunk_rows = false;
  int64_t chunk_tokens = 0, chunk_overlap = 0;
  // "outputs" (bge-m3's sparse / ColBERT rows beside or instead of the dense
  // ones): CSR shards over sparse_columns ids, ragged shards of colbert_dim.
  bool dense = true;
  int64_t sparse_columns = 0, colbert_dim = 0;
  std::vector<Shard> shards;
  uint64_t committed_rows = 0, committed_records = 0, committed_errors_bytes = 0;
  uint64_t records = 0, texts = 0, skipped = 0;
  std::optional<uint64_t> other_tasks, shard_size;
};

// The fields all folders of one job must agree on: they fix the vector space
// (model, tokenizer, pooling, ...) or which input the records came from.
constexpr const char* kSameInAllFolders[] = {
    "model.config_sha256", "model.weights", "tokenizer.sha256", "tokenizer.vocab_size", "pooling",
    "normalize",           "max_length",    "dimensions",       "prompt",               "precision",
    "output_dtype",        "input.format",  "input.text_field", "input.id_field",       "task.count",
    // Several input files (absent for one): the names and sizes of all of them, and how they were split.
    "input.listing_sha256", "task.partition"};
// Final only once a task completes (stdin inputs get their fingerprint then;
// counts.records is the whole input only then), so compared among complete
// folders — except under --partition files, where they are each task's own.
constexpr const char* kSameInCompleteFolders[] = {"input.size", "input.sha256", "counts.records"};

const json* lookup(const json& root, std::string_view dotted) {
  const json* j = &root;
  while (!dotted.empty()) {
    const size_t dot = dotted.find('.');
    const std::string key(dotted.substr(0, dot));
    if (!j->is_object()) return nullptr;
    auto it = j->find(key);
    if (it == j->end()) return nullptr;
    j = &*it;
    dotted = dot == std::string_view::npos ? std::string_view() : dotted.substr(dot + 1);
  }
  return j;
}

const char* type_name(const json& j) {
  if (j.is_number_unsigned()) return "a non-negative integer";
  if (j.is_number_integer()) return "a negative integer";
  return j.type_name();
}

// Reads typed fields of a manifest object; each missing or mistyped field
// becomes one problem naming its path.
class FieldReader {
 public:
  FieldReader(const json& root, std::string prefix, std::vector<std::string>& problems)
      : root_(root), prefix_(std::move(prefix)), problems_(problems) {}

  uint64_t u64(std::string_view path) {
    const json* j = get(path);
    if (j && j->is_number_unsigned()) return j->get<uint64_t>();
    if (j) wrong(path, *j, "a non-negative integer");
    return 0;
  }
  std::optional<uint64_t> optional_u64(std::string_view path) {
    if (!lookup(root_, path)) return std::nullopt;
    return u64(path);
  }
  std::string str(std::string_view path) {
    const json* j = get(path);
    if (j && j->is_string()) return j->get<std::string>();
    if (j) wrong(path, *j, "a string");
    return {};
  }
  bool boolean(std::string_view path) {
    const json* j = get(path);
    if (j && j->is_boolean()) return j->get<bool>();
    if (j) wrong(path, *j, "true or false");
    return false;
  }
  const json* array(std::string_view path) {
    const json* j = get(path);
    if (j && j->is_array()) return j;
    if (j) wrong(path, *j, "an array");
    return nullptr;
  }
  bool ok() const { return ok_; }

 private:
  const json* get(std::string_view path) {
    const json* j = lookup(root_, path);
    if (!j) {
      problems_.push_back("manifest.json: " + prefix_ + std::string(path) + " is missing");
      ok_ = false;
    }
    return j;
  }
  void wrong(std::string_view path, const json& j, const char* expected) {
    problems_.push_back("manifest.json: " + prefix_ + std::string(path) + " is " + type_name(j) + ", expected " +
                        expected);
    ok_ = false;
  }

  const json& root_;
  std::string prefix_;
  std::vector<std::string>& problems_;
  bool ok_ = true;
};

std::string shard_file_name(const char* stem, uint64_t index, const char* ext) {
  return fmt::format("{}-{:05d}{}", stem, index, ext);
}

// Records r < total with r mod count == index: task `index`'s share of the input.
uint64_t task_share(uint64_t total, uint64_t index, uint64_t count) {
  return total > index ? (total - index - 1) / count + 1 : 0;
}

// A plain non-negative JSON integer, as the ids and errors files write record
// numbers; nullopt for anything else (including valid JSON that is not one).
std::optional<uint64_t> parse_record_number(std::string_view line) {
  if (line.empty() || line.size() > 19) return std::nullopt;
  if (line.size() > 1 && line[0] == '0') return std::nullopt;  // JSON has no leading zeros
  uint64_t v = 0;
  for (char c : line) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// Splits a file's text into lines; false when the text does not end with a
// newline (a torn last line).
bool split_lines(std::string_view text, std::vector<std::string_view>& lines) {
  lines.clear();
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      lines.push_back(text.substr(start));
      return false;
    }
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return true;
}

std::string plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

class Verifier {
 public:
  explicit Verifier(VerifyReport& report) : report_(report) {}

  void run(const std::vector<std::string>& names) {
    report_.folders = names.size();
    if (names.empty()) {
      report_.problems.push_back("no output folders given");
      return;
    }
    folders_.resize(names.size());
    for (size_t i = 0; i < names.size(); ++i) load(names[i], folders_[i]);
    check_consistency();
    check_task_coverage();
    for (Folder& f : folders_)
      if (f.readable) check_folder(f);
    for (const Folder& f : folders_) {
      if (!f.readable) continue;
      report_.rows += f.texts;
      report_.skipped += f.skipped;
      // Under --partition files each task counted only its own files' records.
      if (f.complete && f.files_partition) report_.records += f.records;
      else if (f.complete && report_.records == 0) report_.records = f.records;
    }
  }

 private:
  void problem(const Folder& f, const std::string& what) { report_.problems.push_back(f.name + ": " + what); }
  void note(const Folder& f, const std::string& what) { report_.notes.push_back(f.name + ": " + what); }

  // ---- manifest -----------------------------------------------------------

  void load(const std::string& name, Folder& f) {
    f.name = name;
    while (f.name.size() > 1 && f.name.back() == '/') f.name.pop_back();
    f.path = name;
    std::error_code ec;
    if (!fs::exists(f.path, ec)) return problem(f, "no such folder");
    if (!fs::is_directory(f.path, ec)) return problem(f, "is not a folder");
    const fs::path manifest_path = f.path / "manifest.json";
    if (!fs::exists(manifest_path, ec))
      return problem(f, "no manifest.json: not a stoke embed output folder, or its task never committed a shard "
                        "(run or resume the task)");
    try {
      f.manifest = json::parse(read_file(manifest_path));
    } catch (const json::exception& e) {
      return problem(f, std::string("manifest.json is not valid JSON (") + e.what() + ")");
    } catch (const Error& e) {
      return problem(f, std::string("manifest.json cannot be read: ") + e.what());
    }
    if (!f.manifest.is_object()) return problem(f, "manifest.json is not a JSON object");
    const json* format = lookup(f.manifest, "format");
    if (!format || *format != kFormat)
      return problem(f, "manifest.json: format is " + (format ? format->dump() : std::string("missing")) +
                            ", expected \"" + std::string(kFormat) + "\" (not a stoke embed manifest)");
    const json* version = lookup(f.manifest, "format_version");
    if (!version || !version->is_number_unsigned() || version->get<uint64_t>() != kFormatVersion)
      return problem(f, "manifest.json: format_version is " + (version ? version->dump() : std::string("missing")) +
                            ", this stoke reads version " + std::to_string(kFormatVersion));

    std::vector<std::string> field_problems;
    FieldReader m(f.manifest, "", field_problems);
    f.complete = m.boolean("complete");
    m.str("model.config_sha256");
    m.array("model.weights");
    m.str("tokenizer.sha256");
    m.u64("tokenizer.vocab_size");
    m.str("pooling");
    m.boolean("normalize");
    m.u64("max_length");
    f.dimensions = m.u64("dimensions");
    m.str("prompt");
    m.str("precision");
    f.output_dtype = m.str("output_dtype");
    m.str("input.format");
    m.str("input.text_field");
    f.id_field = m.str("input.id_field");
    m.u64("input.size");
    m.str("input.sha256");
    f.task_index = m.u64("task.index");
    f.task_count = m.u64("task.count");
    f.committed_rows = m.u64("committed.rows");
    f.committed_records = m.u64("committed.records");
    f.committed_errors_bytes = m.u64("committed.errors_bytes");
    f.records = m.u64("counts.records");
    f.texts = m.u64("counts.texts");
    f.skipped = m.u64("counts.skipped");
    f.other_tasks = m.optional_u64("counts.other_tasks");
    f.shard_size = m.optional_u64("settings.shard_size");
    if (const json* shards = m.array("shards")) {
      for (size_t i = 0; i < shards->size(); ++i) {
        const json& js = (*shards)[i];
        const std::string prefix = "shards[" + std::to_string(i) + "].";
        if (!js.is_object()) {
          field_problems.push_back("manifest.json: " + prefix.substr(0, prefix.size() - 1) + " is not an object");
          continue;
        }
        FieldReader r(js, prefix, field_problems);
        Shard s;
        s.index = r.u64("index");
        s.embeddings = js.contains("embeddings") && js["embeddings"].is_null() ? "" : r.str("embeddings");
        s.ids = r.str("ids");
        s.rows = r.u64("rows");
        s.first_row = r.u64("first_row");
        s.first_record = r.u64("first_record");
        s.last_record = r.u64("last_record");
        s.records_after = r.u64("records_after");
        s.errors_bytes_after = r.u64("errors_bytes_after");
        s.embeddings_sha256 = s.embeddings.empty() ? "" : r.str("embeddings_sha256");
        if (js.contains("files")) {
          if (!js["files"].is_array()) {
            field_problems.push_back("manifest.json: " + prefix + "files is not a list");
          } else {
            for (const json& file : js["files"]) {
              if (!file.is_object() || !file.value("name", json()).is_string() || !file.value("sha256", json()).is_string()) {
                field_problems.push_back("manifest.json: " + prefix + "files holds " + file.dump() +
                                         ", expected {\"name\", \"sha256\"}");
                continue;
              }
              s.files.emplace_back(file["name"].get<std::string>(), file["sha256"].get<std::string>());
            }
          }
        }
        s.ids_sha256 = r.str("ids_sha256");
        f.shards.push_back(std::move(s));
      }
    }
    for (const auto& p : field_problems) problem(f, p);
    if (!field_problems.empty()) return;

    if (f.task_count == 0) return problem(f, "manifest.json: task.count is 0, expected at least 1");
    if (f.task_index >= f.task_count)
      return problem(f, fmt::format("manifest.json: task.index {} is not below task.count {}", f.task_index,
                                    f.task_count));
    if (f.output_dtype != "f32" && f.output_dtype != "f16")
      return problem(f, "manifest.json: output_dtype is \"" + f.output_dtype + "\", expected \"f32\" or \"f16\"");
    if (f.shard_size && *f.shard_size == 0) return problem(f, "manifest.json: settings.shard_size is 0");
    if (const json* partition = lookup(f.manifest, "task.partition")) {
      if (*partition != "files")
        return problem(f, "manifest.json: task.partition is " + partition->dump() + ", expected \"files\" or none");
      f.files_partition = true;
    }
    f.rec_index = f.files_partition ? 0 : f.task_index;
    f.rec_count = f.files_partition ? 1 : f.task_count;
    if (f.files_partition) check_own_files(f);
    if (const json* ids = lookup(f.manifest, "ids")) {
      if (*ids != "file_record" || !f.files_partition || !f.id_field.empty())
        return problem(f, "manifest.json: ids is " + ids->dump() +
                              ", expected \"file_record\" and only under --partition files without --id-field");
      f.file_record_ids = true;
      if (const json* files = lookup(f.manifest, "input.files"); files && files->is_array())
        for (size_t i = 0; i < files->size(); ++i)
          if ((*files)[i].is_object() && (*files)[i].value("sha256", json()).is_string())
            f.own_file_order[(*files)[i].value("name", "")] = i;
    }
    if (const json* outputs = lookup(f.manifest, "outputs")) {
      if (!outputs->is_object() || !outputs->value("dense", json()).is_boolean())
        return problem(f, "manifest.json: outputs is " + outputs->dump() + ", expected {\"dense\": true|false, ...}");
      f.dense = (*outputs)["dense"].get<bool>();
      if (outputs->contains("sparse")) f.sparse_columns = (*outputs)["sparse"].value("columns", int64_t{0});
      if (outputs->contains("colbert")) f.colbert_dim = (*outputs)["colbert"].value("dim", int64_t{0});
      if (outputs->contains("sparse") && f.sparse_columns <= 0)
        return problem(f, "manifest.json: outputs.sparse.columns is not a positive number");
      if (outputs->contains("colbert") && f.colbert_dim <= 0)
        return problem(f, "manifest.json: outputs.colbert.dim is not a positive number");
    }
    if (const json* chunking = lookup(f.manifest, "chunking")) {
      if (!chunking->is_object() || !chunking->value("tokens", json()).is_number_integer() ||
          !chunking->value("overlap", json()).is_number_integer() || !chunking->value("pool", json()).is_string())
        return problem(f, "manifest.json: chunking is " + chunking->dump() +
                              ", expected {\"tokens\": N, \"overlap\": M, ..., \"pool\": P}");
      f.chunk_rows = (*chunking)["pool"] == "none";
      f.chunk_tokens = (*chunking)["tokens"].get<int64_t>();
      f.chunk_overlap = (*chunking)["overlap"].get<int64_t>();
    }
    f.readable = true;
    if (!f.complete)
      problem(f, fmt::format("unfinished: the manifest says complete: false (task {} of {} was interrupted or is "
                             "still running, {} committed so far): resume it with `stoke embed --output {} "
                             "--resume`",
                             f.task_index, f.task_count, plural(f.committed_rows, "row", "rows"), f.path.string()));
  }

  // --partition files: the task read (and fingerprinted) exactly the files f
  // with f mod count == index, and no other.
  void check_own_files(const Folder& f) {
    const json* files = lookup(f.manifest, "input.files");
    if (!files || !files->is_array()) return problem(f, "manifest.json: input.files is missing (task.partition is files)");
    for (size_t i = 0; i < files->size(); ++i) {
      const json& e = (*files)[i];
      const bool own = i % f.task_count == f.task_index;
      const bool read = e.is_object() && e.contains("sha256") && e["sha256"].is_string();
      if (own != read)
        problem(f, fmt::format("manifest.json: input.files[{}] ({}) {} (file f belongs to task f mod {})", i,
                               e.is_object() && e.contains("name") ? e["name"].dump() : std::string("?"),
                               own ? "is this task's, but has no sha256" : "has a sha256, but is task " +
                                                                              std::to_string(i % f.task_count) + "'s",
                               f.task_count));
    }
  }

  // ---- the set ------------------------------------------------------------

  void check_consistency() {
    const Folder* ref = nullptr;
    const Folder* ref_complete = nullptr;
    std::set<std::string> versions;
    for (const Folder& f : folders_) {
      if (!f.readable) continue;
      if (const json* v = lookup(f.manifest, "stoke_version"); v && v->is_string()) versions.insert(v->get<std::string>());
      if (!ref) {
        ref = &f;
      } else {
        for (const char* field : kSameInAllFolders) compare(*ref, f, field);
      }
      if (!f.complete || f.files_partition) continue;
      if (!ref_complete) {
        ref_complete = &f;
      } else {
        for (const char* field : kSameInCompleteFolders) compare(*ref_complete, f, field);
      }
    }
    if (versions.size() > 1) {
      std::string list;
      for (const auto& v : versions) list += (list.empty() ? "" : ", ") + v;
      report_.notes.push_back("the folders were written by different stoke versions (" + list + ")");
    }
  }

  void compare(const Folder& ref, const Folder& f, const char* field) {
    static const json kAbsent;  // a field one version of stoke does not write
    const json* pa = lookup(ref.manifest, field);
    const json* pb = lookup(f.manifest, field);
    const json& a = pa ? *pa : kAbsent;
    const json& b = pb ? *pb : kAbsent;
    if (a != b) {
      problem(f, fmt::format("{} differs from {}: {} has {}, {} has {} (all tasks of one job must share it)", field,
                             ref.name, ref.name, a.dump(), f.name, b.dump()));
      if (std::string_view(field) == "task.count") counts_disagree_ = true;
    }
  }

  void check_task_coverage() {
    const Folder* ref = nullptr;
    size_t unreadable = 0;
    for (const Folder& f : folders_) {
      if (!f.readable) ++unreadable;
      else if (!ref) ref = &f;
    }
    if (!ref) return;
    std::map<uint64_t, std::vector<const Folder*>> by_index;
    for (const Folder& f : folders_)
      if (f.readable) by_index[f.task_index].push_back(&f);
    report_.tasks = by_index.size();
    for (const auto& [index, holders] : by_index) {
      for (size_t i = 1; i < holders.size(); ++i) {
        std::error_code ec;
        if (fs::equivalent(holders[0]->path, holders[i]->path, ec))
          problem(*holders[i], "is the same folder as " + holders[0]->name + " (given twice)");
        else
          problem(*holders[i], fmt::format("holds task {}, and so does {}: each task must have exactly one folder "
                                           "(remove the stale one)",
                                           index, holders[0]->name));
      }
    }
    if (counts_disagree_) return;  // which tasks exist depends on the count; already reported
    const uint64_t count = ref->task_count;
    // Counted, not listed: a manifest may claim 10^12 tasks, and memory is
    // bounded by the folders given (RELIABILITY 16). Indexes at or past the
    // count were reported by their folders.
    uint64_t present = 0;
    for (const auto& entry : by_index) present += entry.first < count;
    const uint64_t missing = count - present;
    if (missing == 0) return;
    std::string list;
    uint64_t listed = 0;
    // At most 20 names; every index skipped on the way is a folder given, so
    // this loop runs at most folders + 20 times.
    for (uint64_t i = 0; i < count && listed < 20; ++i)
      if (!by_index.count(i)) list += (listed++ ? ", " : "") + std::to_string(i);
    if (missing > listed) list += fmt::format(" and {} more", missing - listed);
    std::string why = unreadable ? fmt::format(" ({} could not be read)", plural(unreadable, "folder", "folders"))
                                 : std::string();
    report_.problems.push_back(fmt::format("tasks: {} of {} missing: no readable folder given holds task{} {}{}; "
                                           "run {} and verify all {} folders together",
                                           missing, count, missing == 1 ? "" : "s", list, why,
                                           missing == 1 ? "it" : "them", count));
  }

  // ---- one folder ---------------------------------------------------------

  void check_folder(const Folder& f) {
    prev_file_record_.reset();
    chunk_state_ = {};
    chunked_records_ = 0;
    try {
      check_shard_list(f);
      const std::set<uint64_t> errors = check_errors_file(f);
      std::optional<uint64_t> prev_id;  // record numbers run strictly upward across the folder
      for (const Shard& s : f.shards) check_shard_files(f, s, errors, prev_id);
      if (f.complete) check_counts(f);
      check_folder_files(f);
    } catch (const std::exception& e) {
      // A file system error (permissions, a folder vanishing) ends this
      // folder's checks; the other folders are still checked.
      problem(f, std::string("checking stopped: ") + e.what());
    }
  }

  // The shard list itself: numbering, rows and record ranges.
  void check_shard_list(const Folder& f) {
    uint64_t rows = 0;
    const Shard* prev = nullptr;
    for (size_t i = 0; i < f.shards.size(); ++i) {
      const Shard& s = f.shards[i];
      const std::string at = fmt::format("shard {} ({})", s.index, s.embeddings);
      // Each check compares a shard with the one before it, so one bad entry
      // is reported once and not again for every shard after it.
      const uint64_t want_index = prev ? prev->index + 1 : 0;
      if (s.index != want_index)
        problem(f, fmt::format("{}: {}, expected shard {} there (shards are listed as 0, 1, 2, ... with none repeated "
                               "or left out)",
                               at, prev ? fmt::format("follows shard {} in the manifest", prev->index)
                                        : std::string("is first in the manifest"),
                               want_index));
      if (f.dense && s.embeddings != shard_file_name("embeddings", s.index, ".npy"))
        problem(f, fmt::format("{}: expected the file name {}", at, shard_file_name("embeddings", s.index, ".npy")));
      if (s.ids != shard_file_name("ids", s.index, ".jsonl"))
        problem(f, fmt::format("{}: ids file is {}, expected {}", at, s.ids, shard_file_name("ids", s.index, ".jsonl")));
      if (s.rows == 0) problem(f, at + ": has 0 rows (a shard holds at least one row)");
      const uint64_t want_first_row = prev ? prev->first_row + prev->rows : 0;
      if (s.first_row != want_first_row)
        problem(f, fmt::format("{}: first_row is {}, expected {} (where the shard before it ends): shards {}", at,
                               s.first_row, want_first_row, s.first_row < want_first_row ? "overlap" : "leave a gap"));
      // A chunked record's rows stay in one shard, which may pass the shard
      // size by them: every shard but the last holds at least shard_size rows.
      if (f.shard_size && f.chunk_rows) {
        if (i + 1 < f.shards.size() && s.rows < *f.shard_size)
          problem(f, fmt::format("{}: has {} rows; with shard_size {} every shard but the last has at least that many",
                                 at, s.rows, *f.shard_size));
      } else if (f.shard_size) {
        if (s.first_row != s.index * *f.shard_size)
          problem(f, fmt::format("{}: first_row is {}, expected index × shard_size = {}", at, s.first_row,
                                 s.index * *f.shard_size));
        if (s.rows > *f.shard_size || (i + 1 < f.shards.size() && s.rows != *f.shard_size))
          problem(f, fmt::format("{}: has {} rows; with shard_size {} every shard but the last has exactly {} and the "
                                 "last at most that",
                                 at, s.rows, *f.shard_size, *f.shard_size));
      }
      rows += s.rows;
      if (s.first_record % f.rec_count != f.rec_index || s.last_record % f.rec_count != f.rec_index)
        problem(f, fmt::format("{}: first_record {} / last_record {} do not belong to task {} of {} (record r "
                               "belongs to task r mod {})",
                               at, s.first_record, s.last_record, f.task_index, f.task_count, f.task_count));
      if (s.last_record < s.first_record) {
        problem(f, fmt::format("{}: last_record {} is before first_record {}", at, s.last_record, s.first_record));
      } else if (!f.chunk_rows && s.rows > 0 && (s.last_record - s.first_record) / f.rec_count + 1 < s.rows) {
        problem(f, fmt::format("{}: {} rows cannot come from records {}..{} (only {} of them belong to task {})", at,
                               s.rows, s.first_record, s.last_record,
                               (s.last_record - s.first_record) / f.rec_count + 1, f.task_index));
      }
      if (s.records_after <= s.last_record)
        problem(f, fmt::format("{}: records_after {} is not past last_record {}", at, s.records_after, s.last_record));
      if (prev) {
        if (s.first_record < prev->records_after)
          problem(f, fmt::format("{}: first_record {} is not after the previous shard (records_after {}): records "
                                 "overlap",
                                 at, s.first_record, prev->records_after));
        if (s.records_after < prev->records_after)
          problem(f, fmt::format("{}: records_after {} goes back from the previous shard's {}", at, s.records_after,
                                 prev->records_after));
        if (s.errors_bytes_after < prev->errors_bytes_after)
          problem(f, fmt::format("{}: errors_bytes_after {} goes back from the previous shard's {}", at,
                                 s.errors_bytes_after, prev->errors_bytes_after));
      }
      prev = &s;
    }
    const uint64_t want_records = prev ? prev->records_after : 0;
    const uint64_t want_errors = prev ? prev->errors_bytes_after : 0;
    // The last commit of a finished task covers the whole input: records
    // after its last row (other tasks', trailing bad ones) and their errors
    // are committed with it, past the last shard's values.
    const bool consistent =
        f.complete ? f.committed_rows == rows && f.committed_records == f.records &&
                         f.committed_records >= want_records && f.committed_errors_bytes >= want_errors
                   : f.committed_rows == rows && f.committed_records == want_records &&
                         f.committed_errors_bytes == want_errors;
    if (!consistent)
      problem(f, fmt::format("manifest.json: committed is rows {}, records {}, errors_bytes {}; the shards say {}, {}, "
                             "{}",
                             f.committed_rows, f.committed_records, f.committed_errors_bytes, rows, want_records,
                             want_errors));
  }

  // errors.jsonl: the skipped records, each once, each this task's. Returns
  // their record numbers (for the check that none was also embedded).
  std::set<uint64_t> check_errors_file(const Folder& f) {
    std::set<uint64_t> records;
    const fs::path path = f.path / "errors.jsonl";
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      if (f.skipped > 0) problem(f, fmt::format("errors.jsonl is missing, but counts.skipped is {}", f.skipped));
      if (f.committed_errors_bytes > 0)
        problem(f, fmt::format("errors.jsonl is missing, but committed.errors_bytes is {}", f.committed_errors_bytes));
      return records;
    }
    std::string text;
    try {
      text = read_file(path);
    } catch (const Error& e) {
      problem(f, std::string("errors.jsonl cannot be read: ") + e.what());
      return records;
    }
    if (text.size() < f.committed_errors_bytes)
      problem(f, fmt::format("errors.jsonl is {} bytes, shorter than the {} committed (truncated)", text.size(),
                             f.committed_errors_bytes));
    // Before completion the file may hold lines past the last commit (resume
    // truncates them), so only a complete task's file is checked line by line.
    if (!f.complete) return records;
    std::vector<std::string_view> lines;
    if (!split_lines(text, lines)) problem(f, "errors.jsonl does not end with a newline (torn last line)");
    if (lines.size() != f.skipped)
      problem(f, fmt::format("errors.jsonl has {}, but counts.skipped is {}", plural(lines.size(), "line", "lines"),
                             f.skipped));
    size_t line_problems = 0;
    auto line_problem = [&](size_t line, const std::string& what) {
      if (line_problems++ < kMaxLineProblems) problem(f, fmt::format("errors.jsonl line {}: {}", line + 1, what));
    };
    for (size_t i = 0; i < lines.size(); ++i) {
      const json e = json::parse(lines[i], nullptr, false);
      const json* r = e.is_object() ? lookup(e, "record") : nullptr;
      if (!r || !r->is_number_unsigned()) {
        line_problem(i, "not a JSON object with a \"record\" number");
        continue;
      }
      const uint64_t record = r->get<uint64_t>();
      if (record % f.rec_count != f.rec_index)
        line_problem(i, fmt::format("record {} belongs to task {}, not {}", record, record % f.rec_count, f.task_index));
      else if (record >= f.records)
        line_problem(i, fmt::format("record {} is past the input's {} records", record, f.records));
      else if (!records.insert(record).second)
        line_problem(i, fmt::format("record {} is listed twice", record));
    }
    if (line_problems > kMaxLineProblems)
      problem(f, fmt::format("errors.jsonl: and {} more such lines", line_problems - kMaxLineProblems));
    return records;
  }

  // One shard's two files: there, unchanged, and holding what the manifest says.
  void check_shard_files(const Folder& f, const Shard& s, const std::set<uint64_t>& errors,
                         std::optional<uint64_t>& prev_id) {
    if (f.dense) {
      check_embeddings(f, s);
    } else if (!s.embeddings.empty()) {
      problem(f, fmt::format("shard {}: lists {}, but outputs.dense is false", s.index, s.embeddings));
    }
    check_extra_files(f, s);
    check_ids(f, s, errors, prev_id);
  }

  // The sparse (CSR) and ColBERT (ragged) files of a shard: the ones the
  // outputs call for, each with its checksum, readable, one row per shard row.
  void check_extra_files(const Folder& f, const Shard& s) {
    std::vector<std::string> want;
    if (f.sparse_columns > 0) {
      const CsrShardFiles n = csr_shard_files(sparse_shard_stem(s.index));
      want.insert(want.end(), {n.indices, n.values, n.indptr});
    }
    if (f.colbert_dim > 0) {
      const RaggedShardFiles n = ragged_shard_files(colbert_shard_stem(s.index));
      want.insert(want.end(), {n.vectors, n.offsets});
    }
    std::vector<std::string> listed;
    for (const auto& [name, sha] : s.files) listed.push_back(name);
    if (listed != want) {
      std::string a, b;
      for (const auto& n : listed) a += (a.empty() ? "" : ", ") + n;
      for (const auto& n : want) b += (b.empty() ? "" : ", ") + n;
      return problem(f, fmt::format("shard {}: files are [{}], expected [{}] (the manifest's outputs)", s.index, a, b));
    }
    bool intact = true;
    for (const auto& [name, sha] : s.files) {
      const std::string at = fmt::format("shard {} ({})", s.index, name);
      std::error_code ec;
      if (!fs::is_regular_file(f.path / name, ec)) {
        problem(f, at + ": file is missing (listed in the manifest but not in the folder)");
        intact = false;
        continue;
      }
      try {
        if (sha256_file(f.path / name) != sha) {
          problem(f, at + ": sha256 does not match the manifest (file changed or corrupted)");
          intact = false;
        }
      } catch (const Error& e) {
        problem(f, at + ": cannot be read: " + e.what());
        intact = false;
      }
    }
    if (!intact) return;
    try {
      if (f.sparse_columns > 0) {
        const CsrRows rows = read_csr_shard(f.path, sparse_shard_stem(s.index), f.sparse_columns);
        if (rows.rows() != s.rows)
          problem(f, fmt::format("shard {} ({}): holds {} rows, expected {}", s.index, sparse_shard_stem(s.index),
                                 rows.rows(), s.rows));
      }
      if (f.colbert_dim > 0) {
        const RaggedRows rows = read_ragged_shard(f.path, colbert_shard_stem(s.index), f.colbert_dim);
        if (rows.rows() != s.rows)
          problem(f, fmt::format("shard {} ({}): holds {} rows, expected {}", s.index, colbert_shard_stem(s.index),
                                 rows.rows(), s.rows));
      }
    } catch (const Error& e) {
      problem(f, fmt::format("shard {}: {}", s.index, e.what()));
    }
  }

  static bool plain_name(const std::string& name) {
    return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
  }

  void check_embeddings(const Folder& f, const Shard& s) {
    const std::string at = fmt::format("shard {} ({})", s.index, s.embeddings);
    if (!plain_name(s.embeddings)) return;  // the name was reported; never look outside the folder
    const fs::path path = f.path / s.embeddings;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
      return problem(f, at + ": file is missing (listed in the manifest but not in the folder)");
    try {
      if (sha256_file(path) != s.embeddings_sha256)
        problem(f, at + ": sha256 does not match the manifest (file changed or corrupted)");
    } catch (const Error& e) {
      return problem(f, at + ": cannot be read: " + e.what());
    }
    NpyHeader h;
    try {
      h = read_npy_header(path);
    } catch (const Error& e) {
      std::string what = e.what();
      if (const std::string prefix = path.string() + ": "; what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
      return problem(f, at + ": not a valid .npy file: " + what);
    }
    const std::string want_descr = f.output_dtype == "f16" ? "<f2" : "<f4";
    if (h.descr != want_descr)
      problem(f, fmt::format("{}: dtype is '{}', expected '{}' (output_dtype {})", at, h.descr, want_descr,
                             f.output_dtype));
    if (h.fortran_order) problem(f, at + ": is in Fortran order, expected C order");
    const std::vector<int64_t> want_shape{static_cast<int64_t>(s.rows), static_cast<int64_t>(f.dimensions)};
    if (h.shape != want_shape) {
      std::string got;
      for (size_t i = 0; i < h.shape.size(); ++i) got += (i ? ", " : "") + std::to_string(h.shape[i]);
      problem(f, fmt::format("{}: shape is [{}], expected [{}, {}] (rows, dimensions)", at, got, s.rows, f.dimensions));
      return;  // the size check below would only repeat this
    }
    const size_t item = npy_descr_itemsize(h.descr);
    if (item == 0) return;
    const uint64_t size = fs::file_size(path, ec);
    const uint64_t want = h.data_offset + s.rows * f.dimensions * item;
    if (!ec && size != want)
      problem(f, fmt::format("{}: file is {} bytes, expected {} (header {} + {} rows × {} dimensions × {} bytes){}", at,
                             size, want, h.data_offset, s.rows, f.dimensions, item,
                             size < want ? ": truncated" : ": extra bytes at the end"));
  }

  void check_ids(const Folder& f, const Shard& s, const std::set<uint64_t>& errors, std::optional<uint64_t>& prev_id) {
    const std::string at = fmt::format("shard {} ({})", s.index, s.ids);
    if (!plain_name(s.ids)) return;
    const fs::path path = f.path / s.ids;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
      return problem(f, at + ": file is missing (listed in the manifest but not in the folder)");
    std::string text;
    try {
      text = read_file(path);
    } catch (const Error& e) {
      return problem(f, at + ": cannot be read: " + e.what());
    }
    if (sha256_hex(text) != s.ids_sha256)
      problem(f, at + ": sha256 does not match the manifest (file changed or corrupted)");
    std::vector<std::string_view> lines;
    if (!split_lines(text, lines)) problem(f, at + ": does not end with a newline (torn last line)");
    if (lines.size() != s.rows)
      problem(f, fmt::format("{}: has {}, expected {} (one per row)", at, plural(lines.size(), "line", "lines"),
                             s.rows));
    size_t line_problems = 0;
    auto line_problem = [&](size_t line, const std::string& what) {
      if (line_problems++ < kMaxLineProblems) problem(f, fmt::format("{}: line {}: {}", at, line + 1, what));
    };
    if (f.chunk_rows) return check_chunk_ids(f, s, at, lines, errors);
    if (f.file_record_ids) return check_file_record_ids(f, at, lines);
    const bool record_numbers = f.id_field.empty();  // ids are record numbers, which we can check
    for (size_t i = 0; i < lines.size(); ++i) {
      std::optional<uint64_t> record = parse_record_number(lines[i]);
      if (!record) {
        const json j = json::parse(lines[i], nullptr, false);
        if (j.is_discarded()) {
          line_problem(i, "not a JSON value");
          continue;
        }
        if (j.is_number_unsigned()) record = j.get<uint64_t>();
      }
      if (!record_numbers) continue;
      if (!record) {
        line_problem(i, "not a record number (input.id_field is \"\", so ids are record numbers)");
        continue;
      }
      const uint64_t r = *record;
      if (r % f.rec_count != f.rec_index)
        line_problem(i, fmt::format("record {} belongs to task {}, not {}", r, r % f.rec_count, f.task_index));
      if (prev_id && r <= *prev_id)
        line_problem(i, fmt::format("record {} is not after the row before it (record {}): duplicated or out of order",
                                    r, *prev_id));
      if (f.complete && r >= f.records)
        line_problem(i, fmt::format("record {} is past the input's {} records", r, f.records));
      if (errors.count(r)) line_problem(i, fmt::format("record {} is embedded but also listed in errors.jsonl", r));
      if (i == 0 && r != s.first_record)
        line_problem(i, fmt::format("record {}, but the manifest's first_record is {}", r, s.first_record));
      if (i + 1 == lines.size() && r != s.last_record)
        line_problem(i, fmt::format("record {}, but the manifest's last_record is {}", r, s.last_record));
      prev_id = r;
    }
    if (line_problems > kMaxLineProblems)
      problem(f, fmt::format("{}: and {} more such lines", at, line_problems - kMaxLineProblems));
  }

  // ids {"file", "record"} (--partition files without --id-field): each
  // names one of the task's own files, and (file's place in the listing,
  // record) runs strictly upward through the folder — the order the task read
  // them in, which is also how rows of every task go back into input order.
  void check_file_record_ids(const Folder& f, const std::string& at, const std::vector<std::string_view>& lines) {
    size_t line_problems = 0;
    auto line_problem = [&](size_t line, const std::string& what) {
      if (line_problems++ < kMaxLineProblems) problem(f, fmt::format("{}: line {}: {}", at, line + 1, what));
    };
    for (size_t i = 0; i < lines.size(); ++i) {
      const json j = json::parse(lines[i], nullptr, false);
      if (!j.is_object() || !j.contains("file") || !j["file"].is_string() || !j.contains("record") ||
          !j["record"].is_number_unsigned() || j.size() != 2) {
        line_problem(i, "not {\"file\": NAME, \"record\": N} (the manifest's ids is \"file_record\")");
        continue;
      }
      const std::string file = j["file"].get<std::string>();
      const auto it = f.own_file_order.find(file);
      if (it == f.own_file_order.end()) {
        line_problem(i, "file " + json(file).dump() + " is not one of this task's files");
        continue;
      }
      const std::pair<uint64_t, uint64_t> key{it->second, j["record"].get<uint64_t>()};
      if (prev_file_record_ && key <= *prev_file_record_)
        line_problem(i, fmt::format("{} record {} is not after the row before it: duplicated or out of order", file,
                                    key.second));
      prev_file_record_ = key;
    }
    if (line_problems > kMaxLineProblems)
      problem(f, fmt::format("{}: and {} more such lines", at, line_problems - kMaxLineProblems));
  }
  std::optional<std::pair<uint64_t, uint64_t>> prev_file_record_;  // across the folder's shards

  // A chunked folder's ids lines: each {the record's id (as an unchunked
  // line has it: "record", "id", or "file" + "record"), "chunk", "chunks",
  // "tokens", "bytes", "chars"}; a record's chunks 0 .. chunks - 1 one
  // after another with one id, overlapping by exactly the manifest's
  // overlap, within its length; a shard ends at a record's last chunk.
  void check_chunk_ids(const Folder& f, const Shard& s, const std::string& at, const std::vector<std::string_view>& lines,
                       const std::set<uint64_t>& errors) {
    size_t line_problems = 0;
    auto line_problem = [&](size_t line, const std::string& what) {
      if (line_problems++ < kMaxLineProblems) problem(f, fmt::format("{}: line {}: {}", at, line + 1, what));
    };
    auto span = [](const json& j, const char* key) -> std::optional<std::pair<uint64_t, uint64_t>> {
      const json* v = j.contains(key) ? &j[key] : nullptr;
      if (!v || !v->is_array() || v->size() != 2 || !(*v)[0].is_number_unsigned() || !(*v)[1].is_number_unsigned() ||
          (*v)[0].get<uint64_t>() > (*v)[1].get<uint64_t>())
        return std::nullopt;
      return std::pair{(*v)[0].get<uint64_t>(), (*v)[1].get<uint64_t>()};
    };
    for (size_t i = 0; i < lines.size(); ++i) {
      const json j = json::parse(lines[i], nullptr, false);
      if (!j.is_object() || !j.value("chunk", json()).is_number_unsigned() ||
          !j.value("chunks", json()).is_number_unsigned()) {
        line_problem(i, "not a chunk's ids line ({\"record\" or \"id\", \"chunk\", \"chunks\", \"tokens\", "
                        "\"bytes\", \"chars\"}; the manifest has chunking)");
        continue;
      }
      const auto tokens = span(j, "tokens"), bytes = span(j, "bytes"), chars = span(j, "chars");
      if (!tokens || !bytes || !chars) {
        line_problem(i, "tokens, bytes and chars must each be [begin, end] with begin <= end");
        continue;
      }
      const uint64_t chunk = j["chunk"].get<uint64_t>(), chunks = j["chunks"].get<uint64_t>();
      json id = j;
      for (const char* k : {"chunk", "chunks", "tokens", "bytes", "chars"}) id.erase(k);
      if (chunk >= chunks) line_problem(i, fmt::format("chunk {} of {}: past the record's chunks", chunk, chunks));
      if (tokens->second - tokens->first > static_cast<uint64_t>(f.chunk_tokens))
        line_problem(i, fmt::format("a chunk of {} tokens, more than chunking.tokens {}", tokens->second - tokens->first,
                                    f.chunk_tokens));
      if (chunk == 0) {
        if (chunk_state_.open)
          line_problem(i, fmt::format("a new record's first chunk, but the one before stopped at chunk {} of {}",
                                      chunk_state_.next - 1, chunk_state_.chunks));
        ++chunked_records_;
        // Record numbers (no --id-field) run upward, each record this task's and not also skipped.
        if (f.id_field.empty() && !f.file_record_ids) {
          if (!id.value("record", json()).is_number_unsigned()) {
            line_problem(i, "no record number (input.id_field is \"\", so a chunk names its record)");
          } else {
            const uint64_t r = id["record"].get<uint64_t>();
            if (r % f.rec_count != f.rec_index)
              line_problem(i, fmt::format("record {} belongs to task {}, not {}", r, r % f.rec_count, f.task_index));
            if (chunk_state_.record && r <= *chunk_state_.record)
              line_problem(i, fmt::format("record {} is not after the record before it ({}): duplicated or out of order",
                                          r, *chunk_state_.record));
            if (errors.count(r)) line_problem(i, fmt::format("record {} is embedded but also listed in errors.jsonl", r));
            if (f.complete && r >= f.records)
              line_problem(i, fmt::format("record {} is past the input's {} records", r, f.records));
            chunk_state_.record = r;
          }
        }
        if (tokens->first != 0) line_problem(i, "a record's first chunk does not start at token 0");
        chunk_state_.open = true;
        chunk_state_.id = id;
        chunk_state_.chunks = chunks;
      } else if (!chunk_state_.open || chunk != chunk_state_.next || chunks != chunk_state_.chunks ||
                 id != chunk_state_.id) {
        line_problem(i, fmt::format("chunk {} of {} of {} does not follow the line before it (chunk {} of {} of {}): "
                                    "a chunk lost, doubled or out of order",
                                    chunk, chunks, id.dump(), chunk_state_.next, chunk_state_.chunks,
                                    chunk_state_.id.dump()));
      } else if (tokens->first + static_cast<uint64_t>(f.chunk_overlap) != chunk_state_.token_end) {
        line_problem(i, fmt::format("chunk {} starts at token {}, expected {} (the chunk before ends at {}, overlap {})",
                                    chunk, tokens->first, chunk_state_.token_end - static_cast<uint64_t>(f.chunk_overlap),
                                    chunk_state_.token_end, f.chunk_overlap));
      }
      chunk_state_.next = chunk + 1;
      chunk_state_.token_end = tokens->second;
      if (chunk + 1 == chunks) chunk_state_.open = false;
    }
    if (chunk_state_.open)
      problem(f, fmt::format("{}: ends inside a record (chunk {} of {}): a record's chunks are in one shard", at,
                             chunk_state_.next - 1, chunk_state_.chunks));
    chunk_state_.open = false;
    (void)s;
    if (line_problems > kMaxLineProblems)
      problem(f, fmt::format("{}: and {} more such lines", at, line_problems - kMaxLineProblems));
  }
  struct ChunkState {
    bool open = false;  // inside a record's chunks
    json id;
    uint64_t next = 0, chunks = 0, token_end = 0;
    std::optional<uint64_t> record;
  } chunk_state_;
  uint64_t chunked_records_ = 0;  // records whose chunks the folder's ids hold

  // A complete task accounts for every one of its records exactly once.
  void check_counts(const Folder& f) {
    const uint64_t share = task_share(f.records, f.rec_index, f.rec_count);
    if (f.chunk_rows) {
      if (chunked_records_ + f.skipped != share)
        problem(f, fmt::format("counts do not add up: {} chunked records + skipped {} = {}, but task {} of {} has {} "
                               "of the input's {} records",
                               chunked_records_, f.skipped, chunked_records_ + f.skipped, f.task_index, f.task_count,
                               share, f.records));
    } else if (f.texts + f.skipped != share)
      problem(f, fmt::format("counts do not add up: texts {} + skipped {} = {}, but task {} of {} has {} of the "
                             "input's {} records",
                             f.texts, f.skipped, f.texts + f.skipped, f.task_index, f.task_count, share, f.records));
    if (f.other_tasks && *f.other_tasks != f.records - share)
      problem(f, fmt::format("counts.other_tasks is {}, expected {} (records {} − this task's {})", *f.other_tasks,
                             f.records - share, f.records, share));
    uint64_t rows = 0;
    for (const Shard& s : f.shards) rows += s.rows;
    if (rows != f.texts)
      problem(f, fmt::format("the shards hold {} rows, but counts.texts is {}", rows, f.texts));
    if (f.committed_records > f.records)
      problem(f, fmt::format("committed.records {} is past counts.records {}", f.committed_records, f.records));
    if (!f.shards.empty() && f.shards.back().last_record >= f.records)
      problem(f, fmt::format("the last shard's last_record {} is past the input's {} records",
                             f.shards.back().last_record, f.records));
  }

  // Nothing in the folder that looks like output but is not committed.
  void check_folder_files(const Folder& f) {
    std::set<std::string> listed;
    for (const Shard& s : f.shards) {
      listed.insert(s.embeddings);
      listed.insert(s.ids);
      for (const auto& [name, sha] : s.files) listed.insert(name);
    }
    std::vector<std::string> uncommitted, temps, partial;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(f.path, ec)) {
      const std::string name = e.path().filename().string();
      if (is_temp_name(e.path())) {
        temps.push_back(name);
        continue;
      }
      if (is_partial_rows_name(e.path())) {
        partial.push_back(name);
        continue;
      }
      const bool looks_like_output = e.path().extension() == ".npy" ||
                                     (name.rfind("ids-", 0) == 0 && e.path().extension() == ".jsonl");
      if (looks_like_output && !listed.count(name)) uncommitted.push_back(name);
    }
    if (ec) return problem(f, "cannot list the folder: " + ec.message());
    std::sort(uncommitted.begin(), uncommitted.end());
    // An unfinished task's folder may hold a shard being written; resume deletes it.
    if (f.complete)
      for (const auto& name : uncommitted)
        problem(f, name + ": not committed (the manifest does not list it): a leftover of an interrupted run or a "
                          "file copied in; remove it");
    if (!temps.empty())
      note(f, fmt::format("{} left by an interrupted write (never taken as output; safe to delete)",
                          plural(temps.size(), "temporary file", "temporary files")));
    // Finished batches of an unfinished window (pipeline/batch_journal.h):
    // a resume takes them; a complete folder no longer needs them.
    if (!partial.empty())
      note(f, fmt::format("{} of finished batches ({}): {}", plural(partial.size(), "partial-*.rows file", "partial-*.rows files"),
                          f.complete ? "left by a kill after the last commit; never taken as output, safe to delete"
                                     : "`stoke embed --output DIR --resume` takes them",
                          partial.front()));
  }

  VerifyReport& report_;
  std::vector<Folder> folders_;
  bool counts_disagree_ = false;
};

}  // namespace

VerifyReport run_verify(const std::vector<std::string>& folders) {
  VerifyReport report;
  Verifier(report).run(folders);
  return report;
}

}  // namespace stoke
