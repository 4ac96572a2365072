// Opens a model folder's tokenizer the way every job needs it: config and
// sentence-transformers files validated, the tokenizer checked against the
// embedding table, and the max length resolved by the DESIGN conventions.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "io/model_folder.h"
#include "text/tokenizer.h"

namespace stoke {

struct ModelTokenizer {
  ModelFolder folder;
  std::unique_ptr<Tokenizer> tokenizer;
  int64_t max_length = 0;       // resolved
  std::string max_length_from;  // "--max-length", "sentence_bert_config.json", ...
};

// max length: --max-length, else sentence_bert_config max_seq_length, else the
// tokenizer's model_max_length, else the model's usable positions; more than
// the usable positions is an error.
ModelTokenizer open_model_tokenizer(const std::string& model_dir, std::optional<int64_t> cli_max_length);

}  // namespace stoke
