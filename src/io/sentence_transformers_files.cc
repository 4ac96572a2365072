#include "io/sentence_transformers_files.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"

namespace stoke {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::vector<std::pair<std::string, fs::path>> sentence_transformers_files(const fs::path& dir) {
  std::vector<std::pair<std::string, fs::path>> out;
  std::error_code ec;
  if (!fs::is_regular_file(dir / "modules.json", ec)) return out;
  for (const char* name : {"modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"})
    if (fs::is_regular_file(dir / name, ec)) out.push_back({name, dir / name});
  const json modules = json::parse(read_file(dir / "modules.json"), nullptr, false);
  if (!modules.is_array()) throw Error(Errc::format, (dir / "modules.json").string() + ": expected a JSON array");
  for (const json& m : modules) {
    const json path = m.is_object() ? m.value("path", json()) : json();
    if (!path.is_string()) continue;
    const fs::path rel = fs::path(path.get<std::string>()).lexically_normal();
    // Module folders only: the Transformer's "" is the folder itself, and a
    // path leaving the folder is not the model's to copy.
    if (rel.empty() || rel == "." || rel.is_absolute() || *rel.begin() == "..") continue;
    if (!fs::is_directory(dir / rel, ec)) continue;
    for (const auto& e : fs::directory_iterator(dir / rel, ec))
      if (e.is_regular_file()) out.push_back({(rel / e.path().filename()).generic_string(), e.path()});
  }
  return out;
}

}  // namespace stoke
