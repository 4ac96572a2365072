// A folder whose tokenizer.json and tokenizer_config.json disagree on a
// setting is inconsistent: transformers 5 rebuilds that part of the pipeline
// from tokenizer_config.json (its tokenizer class takes do_lower_case,
// strip_accents, add_prefix_space ... as arguments), while the tokenizer.json
// says otherwise. stoke refuses such a folder in one line naming both files,
// both values and what to edit — it never picks one silently.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace stoke {

// Throws Error(refused) on the first disagreement. `tokenizer_json` and
// `tokenizer_config` are the parsed files, the labels their paths.
void check_tokenizer_config_agrees(const nlohmann::json& tokenizer_json, const std::string& json_label,
                                   const nlohmann::json& tokenizer_config, const std::string& config_label);

}  // namespace stoke
