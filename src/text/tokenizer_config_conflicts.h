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

// transformers 5 does not run a Unigram tokenizer.json's own normalizer and
// pre-tokenizer for XLMRobertaTokenizer and CamembertTokenizer (the
// tokenizer_class of tokenizer_config.json): it takes the vocabulary, the
// first Precompiled charsmap and the post-processor from the file and builds
// the rest itself — Precompiled (or nothing), WhitespaceSplit + Metaspace
// ("always", or "never" when add_prefix_space is false), unk_id of the unk
// token, no byte fallback. Files it saves itself are written that way; older
// files (hub XLM-R, bge-m3, multilingual-e5: Replace steps and Metaspace
// alone) are not, and give other ids in transformers 5 than in tokenizers.
// Returns "" when the file is what transformers builds, else a description
// of the first difference ("field X is Y; transformers 5's <class> runs Z").
std::string transformers_pipeline_difference(const nlohmann::json& tokenizer_json,
                                             const nlohmann::json& tokenizer_config);

}  // namespace stoke
