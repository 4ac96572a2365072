// The files that make a model folder a sentence-transformers model
// (modules.json, sentence_bert_config.json, config_sentence_transformers.json
// and the files of each module folder modules.json names: 1_Pooling/config.json,
// 2_Normalize/... when present), for copying into a folder derived from it —
// a trained model — so it pools and normalizes as its base did.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace stoke {

// (name inside the folder, e.g. "1_Pooling/config.json"; the file's path).
// Empty when the folder has no modules.json. Module paths that are absolute or
// leave the folder are passed by. Throws Error(format) for a modules.json that
// is not a JSON array.
std::vector<std::pair<std::string, std::filesystem::path>> sentence_transformers_files(
    const std::filesystem::path& folder);

}  // namespace stoke
