#include "io/hf_hub_cache.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace stoke {

namespace fs = std::filesystem;

namespace {

// A repo name part as the hub accepts it: letters, digits, '_', '-', '.',
// not starting or ending with '-' or '.', without "--" or "..", at most 96 chars.
bool valid_name_part(std::string_view s) {
  if (s.empty() || s.size() > 96) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) return false;
  }
  if (s.front() == '-' || s.front() == '.' || s.back() == '-' || s.back() == '.') return false;
  return s.find("--") == std::string_view::npos && s.find("..") == std::string_view::npos;
}

// A revision names a file under refs/ (branches may hold '/', as
// "refs/pr/1" does): it must stay inside refs/.
bool valid_revision(std::string_view rev) {
  if (rev.empty() || rev.size() > 256 || rev.front() == '/' || rev.back() == '/') return false;
  for (char c : rev)
    if (static_cast<unsigned char>(c) <= ' ' || c == '\\' || c == 0x7f) return false;
  size_t start = 0;
  for (;;) {
    const size_t slash = rev.find('/', start);
    const std::string_view part = rev.substr(start, slash == std::string_view::npos ? rev.size() - start : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

bool is_commit_sha(std::string_view s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// Why `root` does not hold the snapshot ("" when it does; then *out is set).
std::string look_in_root(const HubModelRef& ref, const HubCacheRoot& root, HubSnapshot* out) {
  std::error_code ec;
  const std::string folder = hub_repo_folder_name(ref.repo_id);
  const fs::path repo = root.path / folder;
  if (!fs::is_directory(repo, ec)) return "no " + folder;
  std::string commit = ref.revision;
  if (!is_commit_sha(ref.revision)) {
    const fs::path ref_file = repo / "refs" / ref.revision;
    if (!fs::is_regular_file(ref_file, ec)) return "no " + folder + "/refs/" + ref.revision;
    std::ifstream in(ref_file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    commit = text.str();
    while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r' || commit.back() == ' '))
      commit.pop_back();
    if (!is_commit_sha(commit))
      throw Error(Errc::format, ref_file.string() + ": expected a 40-hex commit sha, found \"" + commit.substr(0, 60) +
                                    "\" (a damaged Hugging Face cache? download the model again)");
  }
  const fs::path dir = repo / "snapshots" / commit;
  if (!fs::is_directory(dir, ec)) return "no " + folder + "/snapshots/" + commit;
  *out = HubSnapshot{ref.repo_id, ref.revision, commit, root.path, dir};
  return "";
}

}  // namespace

std::optional<HubModelRef> parse_hub_model_ref(std::string_view text) {
  HubModelRef ref;
  const size_t at = text.find('@');
  if (at != std::string_view::npos) {
    ref.revision = std::string(text.substr(at + 1));
    if (!valid_revision(ref.revision)) return std::nullopt;
    text = text.substr(0, at);
  }
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) {
    if (!valid_name_part(text)) return std::nullopt;
  } else if (!valid_name_part(text.substr(0, slash)) || !valid_name_part(text.substr(slash + 1))) {
    return std::nullopt;  // also "a/b/c": the second part would hold a '/'
  }
  ref.repo_id = std::string(text);
  return ref;
}

std::string hub_repo_folder_name(const std::string& repo_id) {
  std::string name = "models--";
  for (char c : repo_id) {
    if (c == '/')
      name += "--";
    else
      name += c;
  }
  return name;
}

std::vector<HubCacheRoot> hf_hub_cache_roots() {
  std::vector<HubCacheRoot> roots;
  auto add = [&](fs::path p, const char* from) {
    p = p.lexically_normal();
    if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();  // "/x/hub/" is "/x/hub"
    for (const auto& r : roots)
      if (r.path == p) return;
    roots.push_back({p, from});
  };
  if (const std::string v = env("HF_HUB_CACHE"); !v.empty()) add(v, "HF_HUB_CACHE");
  if (const std::string v = env("HF_HOME"); !v.empty()) add(fs::path(v) / "hub", "HF_HOME");
  if (const std::string v = env("HOME"); !v.empty()) add(fs::path(v) / ".cache" / "huggingface" / "hub", "HOME");
  return roots;
}

HubSnapshot find_hub_snapshot(const HubModelRef& ref, const std::vector<HubCacheRoot>& roots) {
  std::string looked;
  for (const HubCacheRoot& root : roots) {
    HubSnapshot found;
    const std::string missing = look_in_root(ref, root, &found);
    if (missing.empty()) return found;
    looked += (looked.empty() ? "" : "; ") + root.path.string() + " ($" + root.from + "): " + missing;
  }
  if (looked.empty()) looked = "none: HF_HUB_CACHE, HF_HOME and HOME are all unset";
  const std::string revision_flag = ref.revision == "main" ? "" : " --revision " + ref.revision;
  throw Error(Errc::not_found,
              ref.repo_id + (ref.revision == "main" ? "" : "@" + ref.revision) +
                  ": no such model folder, and revision " + ref.revision + " of Hugging Face model " + ref.repo_id +
                  " is not in the local hub cache (looked in " + looked +
                  "); stoke never downloads: fetch it first with `hf download " + ref.repo_id + revision_flag +
                  "` (or `huggingface-cli download " + ref.repo_id + revision_flag + "`)");
}

ModelLocation locate_model(const std::string& given) {
  ModelLocation loc;
  loc.given = given;
  loc.dir = given;
  std::error_code ec;
  // What exists here is what the user meant: a folder named like "org/name"
  // is that folder, never the hub model.
  if (given.empty() || fs::exists(fs::symlink_status(given, ec))) return loc;
  const std::optional<HubModelRef> ref = parse_hub_model_ref(given);
  if (!ref) return loc;
  loc.hub = find_hub_snapshot(*ref, hf_hub_cache_roots());
  loc.dir = loc.hub->dir;
  return loc;
}

}  // namespace stoke
