#include "io/model_folder_error.h"

#include <set>
#include <vector>

#include "core/file_util.h"

namespace stoke {

namespace fs = std::filesystem;

const char* model_folder_errc_name(ModelFolderErrc e) {
  switch (e) {
    case ModelFolderErrc::no_config: return "no_config";
    case ModelFolderErrc::pickle_only: return "pickle_only";
    case ModelFolderErrc::no_weights: return "no_weights";
    case ModelFolderErrc::shard_path_escapes: return "shard_path_escapes";
    case ModelFolderErrc::shard_missing: return "shard_missing";
    case ModelFolderErrc::tensor_in_two_shards: return "tensor_in_two_shards";
    case ModelFolderErrc::tensor_not_in_shard: return "tensor_not_in_shard";
    case ModelFolderErrc::missing_tensor: return "missing_tensor";
    case ModelFolderErrc::shape_mismatch: return "shape_mismatch";
    case ModelFolderErrc::dtype_unsupported: return "dtype_unsupported";
    case ModelFolderErrc::vocab_too_small: return "vocab_too_small";
    case ModelFolderErrc::bad_index: return "bad_index";
  }
  return "model_folder_error";
}

Errc model_folder_errc_family(ModelFolderErrc e) {
  switch (e) {
    case ModelFolderErrc::no_config:
    case ModelFolderErrc::no_weights:
    case ModelFolderErrc::shard_missing:
    case ModelFolderErrc::missing_tensor: return Errc::not_found;
    case ModelFolderErrc::pickle_only:
    case ModelFolderErrc::shard_path_escapes: return Errc::refused;
    case ModelFolderErrc::dtype_unsupported: return Errc::unsupported;
    case ModelFolderErrc::tensor_in_two_shards:
    case ModelFolderErrc::tensor_not_in_shard:
    case ModelFolderErrc::shape_mismatch:
    case ModelFolderErrc::vocab_too_small:
    case ModelFolderErrc::bad_index: return Errc::format;
  }
  return Errc::format;
}

std::string read_json_text(const fs::path& path, uint64_t max_bytes) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    const uint64_t size = fs::file_size(path, ec);
    if (!ec && size > max_bytes) {
      throw Error(Errc::format, path.string() + ": " + std::to_string(size) +
                                    " bytes, more than the " + std::to_string(max_bytes) +
                                    " bytes allowed for this JSON file");
    }
  }
  return read_file(path);  // names the path on not_found / io
}

nlohmann::json parse_json_strict(std::string_view text, const std::string& label) {
  // One set of keys per open object; the innermost object is at the back.
  std::vector<std::set<std::string>> open_objects;
  auto callback = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      open_objects.emplace_back();
    } else if (event == E::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == E::key && !open_objects.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second) {
        throw Error(Errc::format, label + ": key \"" + key +
                                      "\" appears twice in one JSON object (which one is meant?)");
      }
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                                 /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    throw Error(Errc::format, label + ": not valid JSON: " + e.what());
  }
}

std::string folder_path_problem(const fs::path& folder, std::string_view relative) {
  if (relative.empty()) return "is empty";
  if (relative.find('\0') != std::string_view::npos) return "contains a NUL byte";
  const fs::path rel{std::string(relative)};
  if (rel.is_absolute() || relative.front() == '/') return "is an absolute path";
  for (const auto& part : rel) {
    if (part == "..") return "contains \"..\"";
  }
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(folder, ec);
  if (ec) return "cannot be checked: the folder " + folder.string() + " cannot be resolved: " + ec.message();
  const fs::path resolved = fs::weakly_canonical(folder / rel, ec);
  if (ec) return "cannot be resolved: " + ec.message();
  // Lexical comparison of two canonical paths: /a/bc is not inside /a/b.
  const fs::path inside = resolved.lexically_relative(base);
  if (inside.empty() || *inside.begin() == "..") {
    // The one layout where links leave the folder by design: a Hugging Face hub
    // cache snapshot (models--org--name/snapshots/<rev>/file -> ../../blobs/<hash>).
    // Links into that same repository's blobs/ store are accepted, nothing else.
    const fs::path repo = base.parent_path().parent_path();
    if (base.parent_path().filename() == "snapshots" && repo.filename().string().rfind("models--", 0) == 0) {
      const fs::path in_blobs = resolved.lexically_relative(repo / "blobs");
      if (!in_blobs.empty() && *in_blobs.begin() != ".." && std::distance(in_blobs.begin(), in_blobs.end()) == 1)
        return "";
    }
    return "resolves to " + resolved.string() + ", outside the folder " + base.string() +
           " (a symlink leaving the folder?)";
  }
  return "";
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace stoke
