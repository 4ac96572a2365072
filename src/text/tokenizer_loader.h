// Loads the tokenizer of a Hugging Face model folder, in the precedence of the
// DESIGN conventions: tokenizer.json when present (WordPiece, Unigram or BPE),
// else vocab.txt + tokenizer_config.json (BERT), sentencepiece.bpe.model +
// tokenizer_config.json (XLM-R), or vocab.json + merges.txt (RoBERTa).
// Anything stoke cannot reproduce exactly is refused by name, and so is a
// folder whose tokenizer.json and tokenizer_config.json disagree.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "text/tokenizer.h"

namespace stoke {

struct TokenizerLoadOptions {
  // sentence_bert_config.json's do_lower_case: true lowercases the text before
  // the tokenizer; false leaves the tokenizer's own setting alone.
  bool lowercase_input = false;
};

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& model_dir,
                                          const TokenizerLoadOptions& options = {});

// The pieces, usable on their own (tests, fuzzers).
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& json_text, const std::string& label,
                                               const std::filesystem::path& model_dir = {});
std::unique_ptr<Tokenizer> load_bert_vocab_tokenizer(const std::filesystem::path& vocab_txt,
                                                     const std::string& tokenizer_config_json);
std::unique_ptr<Tokenizer> load_roberta_bpe_tokenizer(const std::filesystem::path& vocab_json,
                                                      const std::filesystem::path& merges_txt,
                                                      const std::string& tokenizer_config_json);
std::unique_ptr<Tokenizer> load_xlmr_sentencepiece_tokenizer(const std::filesystem::path& spm_model,
                                                             const std::string& tokenizer_config_json);

}  // namespace stoke
