// The parts of a tokenizer.json that make a Unigram or BPE pipeline
// (normalizer, pre_tokenizer, model), parsed strictly: a step or setting
// stoke does not run exactly is refused in one line naming the file, the
// field and the value — never approximated.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "text/normalizers.h"
#include "text/pre_tokenizers.h"
#include "text/word_model.h"

namespace stoke {

TextNormalizer parse_pipeline_normalizer(const nlohmann::json& root, const std::string& label);
PreTokenizer parse_pipeline_pre_tokenizer(const nlohmann::json& root, const std::string& label);
// model.type "Unigram" or "BPE".
std::unique_ptr<WordModel> parse_word_model(const nlohmann::json& model, const std::string& label);

// vocab.json + merges.txt (RoBERTa's files before tokenizer.json): token -> id
// and the merges by rank ("#version" lines skipped).
std::unique_ptr<WordModel> load_bpe_files(const std::string& vocab_json_text, const std::string& vocab_label,
                                          const std::string& merges_text, const std::string& merges_label);

}  // namespace stoke
