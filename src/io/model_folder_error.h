// Errors of Hugging Face model folders (RELIABILITY.md item 2), and the two
// checks every reader of such a folder shares: strict JSON (duplicate keys
// refused) and "does this relative path stay inside the folder".
//
// Folders come from the internet: every refusal names the file and the tensor,
// field or path that caused it, and carries a ModelFolderErrc so tests and the
// CLI can tell the cases apart.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace stoke {

enum class ModelFolderErrc {
  no_config,             // the folder has no config.json
  pickle_only,           // torch.save files only under other names (model.pt, *.pth, ...): never parsed
  no_weights,            // none of model.safetensors, pytorch_model.bin and their indexes
  shard_path_escapes,    // a weight file name that is absolute, has "..", or resolves outside the folder
  shard_missing,         // the index names a shard file that does not exist
  tensor_in_two_shards,  // one tensor name in two shard files (or twice in the weight_map)
  tensor_not_in_shard,   // the weight_map names a tensor its shard does not hold
  missing_tensor,        // a tensor the model needs is absent
  shape_mismatch,        // a tensor's shape contradicts config.json
  dtype_unsupported,     // a weight that is not a float tensor
  vocab_too_small,       // a token id the tokenizer can produce is >= config vocab_size
  bad_index,             // a sharded index (model.safetensors / pytorch_model.bin .index.json) is malformed
};

const char* model_folder_errc_name(ModelFolderErrc e);

// The broad Errc each kind belongs to (pickle_only / shard_path_escapes: refused, ...).
Errc model_folder_errc_family(ModelFolderErrc e);

class ModelFolderError : public Error {
 public:
  ModelFolderError(ModelFolderErrc kind, const std::string& message)
      : Error(model_folder_errc_family(kind), message), kind_(kind) {}
  ModelFolderErrc kind() const { return kind_; }

 private:
  ModelFolderErrc kind_;
};

// ---- helpers shared by the model-folder readers ----------------------------

// Reads a small JSON file (config.json, modules.json, an index, ...) refusing
// files over `max_bytes` before reading them, so a hostile folder cannot make
// us load gigabytes of "config". Throws Error(not_found / io / format).
std::string read_json_text(const std::filesystem::path& path, uint64_t max_bytes = 64ull << 20);

// Parses JSON strictly: not JSON, invalid UTF-8 or a key repeated inside one
// object -> Error(Errc::format) "<label>: ..." (nlohmann keeps the last of two
// equal keys silently; a repeated "hidden_size" or weight_map entry must not
// pass unnoticed). Does not check the top-level type.
nlohmann::json parse_json_strict(std::string_view text, const std::string& label);

// Why `relative` (a name taken from a file in `folder`) does not name a path
// inside `folder`, or "" when it does. Refused: empty, NUL bytes, absolute
// paths, any ".." component, and paths that resolve (following symlinks,
// std::filesystem::weakly_canonical) outside the folder. The folder itself
// ("." or a path resolving to it) counts as inside.
std::string folder_path_problem(const std::filesystem::path& folder, std::string_view relative);

// "[3000, 64]"
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace stoke
