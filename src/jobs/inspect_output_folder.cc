// `stoke inspect` of what the jobs write: an embed output folder (from its
// manifest, docs/output-format.md) and a train output folder (run.json,
// checkpoint-*/, docs/training.md). A description and a light check of the
// files (present, headers agreeing with the manifest); `stoke verify` is the
// full check (checksums, counts, every task), and the report says so.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"
#include "io/folder_lock.h"
#include "io/npy.h"
#include "jobs/inspect_parts.h"

namespace stoke::inspect {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A manifest or run.json is a few kilobytes per shard; past this it is not one.
constexpr uintmax_t kJsonFileLimit = uintmax_t{1} << 30;

// The file's JSON; throws Error(format) with one line when it is not JSON.
json read_json(const fs::path& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw Error(Errc::io, path.string() + ": cannot read: " + ec.message());
  if (size > kJsonFileLimit)
    throw Error(Errc::format, path.string() + ": " + with_commas(size) + " bytes, more than any stoke record holds");
  json j = json::parse(read_file(path), nullptr, false);
  if (j.is_discarded()) throw Error(Errc::format, path.string() + ": not valid JSON");
  return j;
}

// j[k1][k2]...: nullptr where a key is missing or a step is not an object.
const json* at(const json& j, std::initializer_list<const char*> keys) {
  const json* p = &j;
  for (const char* k : keys) {
    if (!p->is_object()) return nullptr;
    auto it = p->find(k);
    if (it == p->end()) return nullptr;
    p = &*it;
  }
  return p;
}

// A field as text: a string as it is, a number or bool as JSON writes it,
// `missing` for absent or null. A list or an object is not a field's value in
// any record inspect reads, and is not printed (dumping a hostile file's
// nesting would recurse as deep as it goes).
std::string text(const json& j, std::initializer_list<const char*> keys, const std::string& missing = "?") {
  const json* p = at(j, keys);
  if (!p || p->is_null()) return missing;
  if (p->is_string()) return p->get<std::string>();
  return p->is_primitive() ? p->dump() : (p->is_array() ? "(a list)" : "(an object)");
}

std::optional<int64_t> integer(const json& j, std::initializer_list<const char*> keys) {
  const json* p = at(j, keys);
  if (!p || !p->is_number_integer()) return std::nullopt;
  return p->get<int64_t>();
}

std::string count(const json& j, std::initializer_list<const char*> keys) {
  const auto v = integer(j, keys);
  return v && *v >= 0 ? with_commas(static_cast<uint64_t>(*v)) : "?";
}

std::string plural(int64_t n, const char* one, const char* many) {
  return with_commas(static_cast<uint64_t>(std::max<int64_t>(n, 0))) + " " + (n == 1 ? one : many);
}

// Who holds the folder's lock (".stoke.lock": {"job", "pid", "host"}), when
// that process is alive on this host: "stoke embed, pid 1234"; else "". A
// lock file stays behind after kill -9, so its presence alone says nothing.
std::string live_holder(const fs::path& dir) {
  const fs::path lock = dir / kFolderLockName;
  std::error_code ec;
  if (!fs::is_regular_file(lock, ec) || fs::file_size(lock, ec) > 4096) return "";
  const json h = json::parse(read_file(lock), nullptr, false);
  const auto pid = integer(h, {"pid"});
  char host[256] = {};
  if (!pid || *pid <= 0 || ::gethostname(host, sizeof host - 1) != 0 || text(h, {"host"}) != host) return "";
  if (::kill(static_cast<pid_t>(*pid), 0) != 0 && errno != EPERM) return "";
  // A reused pid: a program that is neither stoke nor Python (the package) is
  // not the holder. (The program's file, not its comm: stoke re-executes
  // itself through /proc/self/exe, so its comm is "exe".)
  std::error_code link_ec;
  const fs::path program = fs::read_symlink("/proc/" + std::to_string(*pid) + "/exe", link_ec);
  const std::string name = program.filename().string();
  if (!link_ec && name.find("stoke") == std::string::npos && name.find("python") == std::string::npos) return "";
  return "stoke " + text(h, {"job"}) + ", pid " + std::to_string(*pid);
}

// What `--output-dtype` wrote, in numpy's words.
std::string vector_dtype(const std::string& output_dtype) {
  if (output_dtype == "f32") return "float32";
  if (output_dtype == "f16") return "float16";
  return output_dtype;
}

// The light check of one shard: its files are there and the embeddings
// header says [rows, dims] with the bytes to match. "" when it passes.
std::string check_shard(const fs::path& dir, const json& shard, int64_t dims) {
  const std::string emb = text(shard, {"embeddings"}, ""), ids = text(shard, {"ids"}, "");
  const auto rows = integer(shard, {"rows"});
  if (emb.empty() || ids.empty() || !rows || emb.find('/') != std::string::npos || ids.find('/') != std::string::npos)
    return "a shard entry without its file names or rows (shard " + text(shard, {"index"}) + ")";
  std::error_code ec;
  if (!fs::is_regular_file(dir / emb, ec)) return emb + " is missing";
  if (!fs::is_regular_file(dir / ids, ec)) return ids + " is missing";
  NpyHeader h;
  try {
    h = read_npy_header(dir / emb);
  } catch (const Error& e) {
    return std::string(e.what());
  }
  if (h.shape != std::vector<int64_t>{*rows, dims})
    return fmt::format("{} holds {} where the manifest says [{}, {}]", emb, shape_text(h.shape), *rows, dims);
  const uintmax_t want = h.data_offset + static_cast<uintmax_t>(*rows) * static_cast<uintmax_t>(dims) *
                                             npy_descr_itemsize(h.descr);
  const uintmax_t size = fs::file_size(dir / emb, ec);
  if (!ec && size != want)
    return fmt::format("{} is {} bytes where its header needs {}", emb, with_commas(size), with_commas(want));
  return "";
}

// Shard files and temporary files the manifest does not name: what a run
// killed mid-shard leaves, and what resume clears.
std::vector<std::string> uncommitted_files(const fs::path& dir, const json& shards) {
  std::vector<std::string> named;
  if (shards.is_array())
    for (const json& s : shards) {
      named.push_back(text(s, {"embeddings"}, ""));
      named.push_back(text(s, {"ids"}, ""));
    }
  std::vector<std::string> left;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool shard_file = (name.rfind("embeddings-", 0) == 0 && e.path().extension() == ".npy") ||
                            (name.rfind("ids-", 0) == 0 && e.path().extension() == ".jsonl");
    if ((shard_file && std::find(named.begin(), named.end(), name) == named.end()) ||
        name.find(".stoke-tmp-") != std::string::npos)
      left.push_back(name);
  }
  std::sort(left.begin(), left.end());
  return left;
}

// The rows of finished batches a stopped run keeps beside its shards
// (partial-<first record>.rows, one per unfinished sort window; see
// docs/output-format.md): how many files, how many bytes.
std::pair<int64_t, uintmax_t> kept_batches(const fs::path& dir) {
  int64_t files = 0;
  uintmax_t bytes = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("partial-", 0) != 0 || e.path().extension() != ".rows" || !e.is_regular_file(ec)) continue;
    ++files;
    bytes += e.file_size(ec);
  }
  return {files, bytes};
}

std::string list_some(const std::vector<std::string>& names, size_t most = 3) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < most; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > most) s += fmt::format(", and {} more", names.size() - most);
  return s;
}

// checkpoint-STEP folders, by step.
std::vector<std::pair<int64_t, std::string>> checkpoints(const fs::path& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("checkpoint-", 0) != 0 || !e.is_directory(ec)) continue;
    const std::string digits = name.substr(11);
    if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    found.emplace_back(std::stoll(digits), name);
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

void embed_output_folder(const fs::path& dir, std::ostream& out) {
  const fs::path manifest_path = dir / "manifest.json";
  const json m = read_json(manifest_path);
  if (!m.is_object() || text(m, {"format"}) != "stoke-embeddings")
    throw Error(Errc::format, manifest_path.string() + ": not a stoke embed manifest (\"format\" is " +
                                  text(m, {"format"}, "absent") +
                                  ", expected \"stoke-embeddings\"); inspect reads a model folder, a .safetensors "
                                  "file, a .npy file, or an embed or train output folder");
  const bool complete = at(m, {"complete"}) && *at(m, {"complete"}) == true;
  const json shards = at(m, {"shards"}) && at(m, {"shards"})->is_array() ? *at(m, {"shards"}) : json::array();
  const int64_t n_shards = static_cast<int64_t>(shards.size());
  const std::string d = dir.string();

  out << "embed output folder: " << d << (complete ? " (complete)" : " (unfinished)") << "\n";
  // ---- what it holds
  const std::string rows = count(m, {"committed", "rows"});
  if (complete)
    out << "rows: " << rows << " in " << plural(n_shards, "shard", "shards") << " (shard size "
        << text(m, {"settings", "shard_size"}) << "), from " << count(m, {"counts", "records"})
        << " input records: " << count(m, {"counts", "skipped"}) << " skipped as bad, "
        << count(m, {"counts", "other_tasks"}) << " left to other tasks, " << count(m, {"counts", "truncated"})
        << " truncated to the max length\n";
  else
    out << "rows: " << rows << " committed in " << plural(n_shards, "shard", "shards") << " (shard size "
        << text(m, {"settings", "shard_size"}) << "); the first " << count(m, {"committed", "records"})
        << " input records are accounted for\n";
  const std::string prompt = text(m, {"prompt"}, "");
  const std::string normalize = text(m, {"normalize"});
  out << "vectors: " << text(m, {"dimensions"}) << " dims, " << vector_dtype(text(m, {"output_dtype"}))
      << " (embeddings-NNNNN.npy; ids-NNNNN.jsonl beside them), pooling " << text(m, {"pooling"})
      << (normalize == "true" ? ", normalized" : normalize == "false" ? ", not normalized" : ", normalize ?")
      << (prompt.empty() ? "" : ", prompt \"" + prompt + "\"") << "\n";
  const std::string given = text(m, {"model", "source", "given"}, text(m, {"model", "folder"}));
  out << "model: " << text(m, {"model", "folder"}) << " (" << text(m, {"model", "architecture"}) << ", model_type "
      << text(m, {"model", "model_type"}) << ") from " << given << "; precision " << text(m, {"precision"})
      << " on " << text(m, {"settings", "device"}, text(m, {"device"})) << "; max length " << text(m, {"max_length"})
      << "\n";
  if (const json* q = at(m, {"quality"}); q && q->is_object())
    out << "quality: " << text(m, {"precision"}) << " against " << text(*q, {"reference_precision"}) << " on "
        << text(*q, {"sample_texts"}) << " texts: " << text(*q, {"metric"}) << " mean " << text(*q, {"mean"})
        << ", worst " << text(*q, {"min"}) << " (threshold " << text(*q, {"threshold"}) << ")\n";
  const std::string id_field = text(m, {"input", "id_field"}, "");
  std::string input_size = "?";
  if (const auto s = integer(m, {"input", "size"}); s && *s >= 0) input_size = with_commas(static_cast<uint64_t>(*s));
  out << "input: " << text(m, {"input", "name"}) << " (" << text(m, {"input", "format"}) << ", " << input_size
      << " bytes), text field \"" << text(m, {"input", "text_field"}) << "\", ids: "
      << (id_field.empty() ? std::string("record numbers") : "field \"" + id_field + "\"") << "\n";
  out << "settings: batch tokens " << text(m, {"settings", "batch_tokens"}) << ", max batch size "
      << text(m, {"settings", "max_batch_size"}) << ", sort window " << text(m, {"settings", "sort_window"})
      << ", workers " << text(m, {"settings", "workers"}) << ", on error " << text(m, {"settings", "on_error"})
      << "\n";
  const auto task_count = integer(m, {"task", "count"});
  if (task_count && *task_count > 1)
    out << "task: " << text(m, {"task", "index"}) << " of " << *task_count << " (record r is task r mod "
        << *task_count << "'s); `stoke verify` with every task's folder proves the set complete\n";

  // ---- a light check of the files (verify reads them all)
  std::vector<std::string> problems;
  const auto dims = integer(m, {"dimensions"});
  for (const auto& [field, ok] : {std::pair{"dimensions", dims && *dims > 0},
                                  std::pair{"shards", at(m, {"shards"}) && at(m, {"shards"})->is_array()},
                                  std::pair{"committed", integer(m, {"committed", "rows"}).has_value()},
                                  std::pair{"complete", at(m, {"complete"}) && at(m, {"complete"})->is_boolean()}})
    if (!ok) problems.push_back(std::string("the manifest's \"") + field + "\" is missing or malformed");
  if (dims && *dims > 0)
    for (const json& s : shards)
      if (const std::string p = check_shard(dir, s, *dims); !p.empty()) problems.push_back(p);
  if (problems.empty() && n_shards == 0)
    out << "files: no shard committed yet\n";
  else if (problems.empty())
    out << "files: " << (n_shards == 1 ? std::string("the shard the manifest names is")
                                      : "the " + plural(n_shards, "shard", "shards") + " the manifest names are")
        << " present, headers agreeing with its rows and dims\n";
  else
    out << "files: " << plural(static_cast<int64_t>(problems.size()), "problem", "problems") << ": "
        << list_some(problems) << "\n";

  // ---- how to go on
  if (!complete) {
    if (const std::string holder = live_holder(dir); !holder.empty()) {
      // Its temporary and partial files are work in progress, not leftovers.
      out << "running: " << holder << " holds the folder now; inspect it again when the run ends\n";
    } else {
      const std::vector<std::string> left = uncommitted_files(dir, shards);
      if (!left.empty())
        out << "uncommitted: " << list_some(left) << " (not in the manifest: resume clears and redoes them)\n";
      if (const auto [files, bytes] = kept_batches(dir); files > 0)
        out << "kept: " << plural(files, "partial-*.rows file", "partial-*.rows files") << " ("
            << with_commas(bytes)
            << " bytes): rows of finished batches past the last shard, which resume takes instead of computing "
               "them again\n";
      if (const json* o = at(m, {"options"}); o && o->is_object()) {  // the run's flags, for --resume alone
        out << "unfinished: the run stopped or was killed before its last shard; resume takes its settings from "
               "the manifest:\n";
        out << "resume: stoke embed --output " << d << " --resume\n";
      } else {
        // An older manifest keeps the input's name, not its path: the user knows where it is.
        out << "unfinished: the run stopped or was killed before its last shard; resume it with the first run's "
               "input and flags (resume refuses, by name, a setting that differs):\n";
        const std::string input = at(m, {"input", "files"}) ? std::string("INPUTS") : text(m, {"input", "name"});
        out << "resume: stoke embed --output " << d << " --resume --model " << given << " --input " << input << "\n";
      }
    }
  }
  const bool split = task_count && *task_count > 1;
  out << "check: stoke verify " << d << " (every file's checksum, the counts" << (split ? ", every task" : "")
      << ")\n";
  if (!problems.empty())
    throw Error(Errc::format, d + ": " + problems.front() + "; stoke verify " + d + " lists every problem");
}

bool looks_like_train_output(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "run.json", ec) || !checkpoints(dir).empty();
}

void train_output_folder(const fs::path& dir, bool final_model, std::ostream& out) {
  const std::string d = dir.string();
  const auto ckpts = checkpoints(dir);
  std::string names;
  for (size_t i = 0; i < ckpts.size(); ++i) names += (i ? ", " : "") + ckpts[i].second;
  std::error_code ec;
  std::optional<json> run;
  if (fs::is_regular_file(dir / "run.json", ec)) run = read_json(dir / "run.json");

  if (final_model) {  // the model's report came first: the training record after it
    out << "train output: ";
    if (run)
      out << "run.json: " << text(*run, {"steps"}) << " of " << text(*run, {"total_steps"}) << " steps ("
          << text(*run, {"epochs"}) << " epochs) from " << text(*run, {"model", "given"}) << " on "
          << text(*run, {"data", "train"}) << ", precision " << text(*run, {"settings", "precision"}) << "; ";
    out << (ckpts.empty() ? std::string("no checkpoints kept") : "checkpoints: " + names)
        << "; the folder's own model is the final one\n";
    return;
  }
  out << "train output folder: " << d << " (unfinished: no final model yet" << (run ? "" : ", no run.json") << ")\n";
  if (ckpts.empty()) {
    out << "checkpoints: none yet (a run keeps one every --save-every steps): a new run starts over\n";
  } else {
    const fs::path newest = dir / ckpts.back().second;
    std::string step;
    if (fs::is_regular_file(newest / "trainer_state.json", ec)) {
      const json state = json::parse(read_file(newest / "trainer_state.json"), nullptr, false);
      step = " at step " + text(state, {"step"}) + " of " + text(state, {"total_steps"});
    }
    out << "checkpoints: " << names << "; the newest" << step << " is a model folder: stoke inspect "
        << newest.string() << "\n";
  }
  if (const std::string holder = live_holder(dir); !holder.empty()) {
    out << "running: " << holder << " holds the folder now; inspect it again when the run ends\n";
  } else if (!ckpts.empty()) {
    out << "resume: stoke train --output " << d
        << " --resume  (with the first run's --model, --train and settings: resume refuses any that differs)\n";
  }
}

}  // namespace stoke::inspect
