// `--model BAAI/bge-m3[@revision]`: a Hugging Face hub id found in the local
// hub cache that `hf download` / `huggingface-cli download` fills. Read only,
// never fetched: stoke makes no network requests.
//
// The cache layout (huggingface_hub's, as it writes it):
//   <root>/models--<org>--<name>/refs/<revision>      a file holding a commit sha
//   <root>/models--<org>--<name>/snapshots/<sha>/...  the files, as symlinks into
//   <root>/models--<org>--<name>/blobs/<hash>         the content
// A path that exists locally always wins over a hub id of the same spelling.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stoke {

// "org/name" or "name", with "@revision" optional (default "main").
struct HubModelRef {
  std::string repo_id;            // "BAAI/bge-m3"
  std::string revision = "main";  // a branch or tag under refs/, or a 40-hex commit sha
};
// nullopt when `text` cannot be a hub id (an absolute or ./ path, "..",
// more than one '/', characters the hub does not allow in a repo name).
std::optional<HubModelRef> parse_hub_model_ref(std::string_view text);
// "models--BAAI--bge-m3": the repository's folder under a cache root.
std::string hub_repo_folder_name(const std::string& repo_id);

// One place the cache may be, and the variable that put it there.
struct HubCacheRoot {
  std::filesystem::path path;
  std::string from;  // "HF_HUB_CACHE", "HF_HOME", "HOME" (~/.cache/huggingface/hub)
};
// Where huggingface_hub keeps its cache, in its order of precedence:
// $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub. Every one
// that is set is returned (duplicates once) and searched in this order, so a
// model downloaded before HF_HUB_CACHE was set is still found.
std::vector<HubCacheRoot> hf_hub_cache_roots();

struct HubSnapshot {
  std::string repo_id;
  std::string revision;          // as asked
  std::string commit;            // the snapshot's sha (the revision itself when it was one)
  std::filesystem::path root;    // the cache root it was found in
  std::filesystem::path dir;     // <root>/models--org--name/snapshots/<commit>
};
// The snapshot `ref` names in the first root that holds it. Throws
// Error(not_found) in one line: the id, the revision, each root looked in and
// what was missing there, and how to download it (stoke never does).
// Error(format) when a refs/ file does not hold a commit sha.
HubSnapshot find_hub_snapshot(const HubModelRef& ref, const std::vector<HubCacheRoot>& roots);

// What --model named and what stoke loads for it.
struct ModelLocation {
  std::string given;                  // as the user wrote it
  std::filesystem::path dir;          // the folder to open
  std::optional<HubSnapshot> hub;     // set when `given` was resolved as a hub id
};
// A path that exists is that path (even when spelled like "org/name");
// otherwise a text that parses as a hub id is looked up in the cache
// (find_hub_snapshot's errors, which also say no such folder exists);
// anything else is returned as a path for the model folder loader to refuse.
ModelLocation locate_model(const std::string& given);

}  // namespace stoke
