#include "jobs/train_output.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "core/error.h"
#include "core/file_util.h"
#include "io/atomic_file.h"
#include "train/checkpoint.h"

namespace stoke {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A killed checkpoint save leaves "checkpoint-N.stoke-partial-<pid>" (train/checkpoint.cc).
constexpr std::string_view kPartialMarker = ".stoke-partial-";

fs::path without_trailing_slash(fs::path p) {
  p = p.lexically_normal();
  if (p.has_parent_path() && p.filename().empty()) p = p.parent_path();
  return p;
}

// True when `inner` is `outer` or lies below it (both canonical).
bool within(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i)
    if (i == inner.end() || *i != *o) return false;
  return true;
}

// A job never writes over or deletes its own inputs: `train --model X
// --output X --overwrite` used to delete X/model.safetensors before reading it.
void refuse_own_inputs(const TrainOptions& o) {
  std::error_code ec;
  const fs::path model = without_trailing_slash(fs::canonical(o.common.model, ec));
  if (ec) return;  // a missing model is reported when it is opened
  const fs::path out = without_trailing_slash(fs::weakly_canonical(o.output, ec));
  if (ec) return;
  if (within(out, model))
    throw Error(Errc::refused, "--output " + o.output + (out == model ? " is" : " is inside") + " --model " +
                                   o.common.model + ": training would write over the model it reads; choose "
                                   "another --output folder");
  if (o.overwrite && within(model, out))
    throw Error(Errc::refused, "--model " + o.common.model + " is inside --output " + o.output +
                                   ": --overwrite would delete the model being trained; copy it elsewhere first");
}

// The files a stoke model folder's checksums.json (its commit record) lists,
// relative to the folder, with checksums.json itself; empty when there is
// none — a folder stoke did not write.
std::set<std::string> checksummed_files(const fs::path& folder) {
  std::set<std::string> names;
  std::error_code ec;
  if (!fs::is_regular_file(folder / "checksums.json", ec)) return names;
  const json j = json::parse(read_file(folder / "checksums.json"), nullptr, false);
  if (!j.is_object() || !j.contains("sha256") || !j["sha256"].is_object()) return names;
  for (const auto& [name, sum] : j["sha256"].items()) {
    const fs::path p = fs::path(name).lexically_normal();
    if (p.empty() || p.is_absolute() || *p.begin() == "..") continue;  // never a path leaving the folder
    names.insert(p.generic_string());
  }
  names.insert("checksums.json");
  return names;
}

// checkpoint-N, a real folder, committed by its checksums.json: one stoke wrote.
bool is_stoke_checkpoint(const fs::directory_entry& e) {
  const std::string name = e.path().filename().string();
  if (e.is_symlink() || !e.is_directory() || !name.starts_with("checkpoint-") || name.size() == 11) return false;
  if (!std::all_of(name.begin() + 11, name.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  std::error_code ec;
  return fs::is_regular_file(e.path() / "checksums.json", ec);
}

struct Removal {
  fs::path path;
  bool whole = false;  // remove_all (a checkpoint or temp folder); else a file, or a folder left empty
};

// What --overwrite removes: everything is checked before anything goes, and
// the first file no stoke run wrote stops it, named.
std::vector<Removal> previous_run_files(const fs::path& out, const std::string& output_flag) {
  std::set<std::string> wrote = checksummed_files(out);  // the final model's files
  // A kill during the final model's save leaves its files without their
  // checksums.json: they carry the names a checkpoint of the run lists.
  for (const auto& e : fs::directory_iterator(out))
    if (is_stoke_checkpoint(e)) wrote.merge(checksummed_files(e.path()));
  wrote.insert("log.jsonl");
  wrote.insert("run.json");
  std::vector<Removal> removals;
  auto walk = [&](auto&& self, const fs::path& dir, const std::string& rel) -> void {
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      const std::string relative = rel.empty() ? name : rel + "/" + name;
      if (rel.empty() && is_folder_lock_name(e.path())) continue;
      if (is_temp_name(e.path()) || name.find(kPartialMarker) != std::string::npos ||
          (rel.empty() && is_stoke_checkpoint(e))) {
        removals.push_back({e.path(), true});
      } else if (wrote.count(relative)) {
        removals.push_back({e.path(), false});
      } else if (e.is_directory() && !e.is_symlink()) {
        self(self, e.path(), relative);     // e.g. 1_Pooling/config.json
        removals.push_back({e.path(), false});  // after its files: empty by then
      } else {
        throw Error(Errc::refused, "--output " + output_flag + " holds " + relative +
                                       ", which no earlier stoke training run wrote there; --overwrite removes only "
                                       "a run's own files: move it away or use another folder");
      }
    }
  };
  walk(walk, out, "");
  return removals;
}

}  // namespace

TrainOutputStart prepare_train_output(const TrainOptions& o) {
  refuse_own_inputs(o);
  const fs::path out(o.output);
  TrainOutputStart start;
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw Error(Errc::invalid_argument, o.output + ": exists and is not a folder");
  // Before anything in the folder is looked at: a second run, or a --resume
  // of a live one, must not clear its temp files or checkpoints.
  start.lock = FolderLock::acquire(out, "train");
  if (const std::string note = start.lock.note(); !note.empty()) start.notes.push_back(note);

  train::remove_partial_checkpoints(out);
  const auto checkpoints = train::list_checkpoints(out);
  const bool has_output =
      !checkpoints.empty() || fs::exists(out / "model.safetensors") || fs::exists(out / "log.jsonl");
  if (o.resume && !o.resume_from.empty()) {
    start.resume_dir = o.resume_from;
    train::verify_checkpoint(start.resume_dir);
  } else if (o.resume) {
    for (auto it = checkpoints.rbegin(); it != checkpoints.rend(); ++it) {
      try {
        train::verify_checkpoint(it->second);
        start.resume_dir = it->second;
        break;
      } catch (const Error& e) {
        start.notes.push_back(std::string("skipping a damaged checkpoint: ") + e.what());
      }
    }
    if (start.resume_dir.empty() && has_output)
      start.notes.push_back("no usable checkpoint in " + o.output + ": starting from the beginning");
  } else if (has_output && !o.overwrite) {
    throw Error(Errc::refused, o.output + " already holds a training run (checkpoints, model or log); --resume "
                                          "continues it, --overwrite replaces it");
  }
  if (o.overwrite && has_output && !o.resume) {
    for (const Removal& r : previous_run_files(out, o.output)) {
      if (r.whole) fs::remove_all(r.path, ec);
      else fs::remove(r.path, ec);
      if (ec) throw Error(Errc::io, r.path.string() + ": cannot remove: " + ec.message());
    }
  }
  if (start.resume_dir.empty() && fs::exists(out / "log.jsonl")) fs::remove(out / "log.jsonl", ec);
  return start;
}

}  // namespace stoke
