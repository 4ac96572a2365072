// A Hugging Face model folder as stoke opens it: config.json plus the
// sentence-transformers layout, validated together. Weights are opened
// separately (open_model_folder_weights), so `stoke tokenize` never maps them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

#include "io/hf_config.h"
#include "io/model_folder_error.h"
#include "io/model_weights.h"
#include "io/sentence_transformers.h"

namespace stoke {

struct ModelFolder {
  std::filesystem::path dir;        // the folder the user named
  // Where config.json, the weights and the tokenizer files are: `dir`, or the
  // sentence-transformers Transformer module's folder in older saves ("0_BERT").
  std::filesystem::path model_dir;
  HfConfig config;
  SentenceTransformersConfig st;    // st.present == false for a plain HF folder
};

// Throws Error(not_found / invalid_argument) when `dir` is not a folder,
// ModelFolderError(no_config) without config.json, ModelFolderError(shape_mismatch)
// when the Pooling module's word_embedding_dimension contradicts hidden_size,
// and whatever parse_hf_config / load_sentence_transformers refuse.
ModelFolder open_model_folder(const std::filesystem::path& dir);

// open_model_weights(folder.model_dir).
ModelWeights open_model_folder_weights(const ModelFolder& folder);

// Refuses (ModelFolderError vocab_too_small) a tokenizer that can produce
// `max_token_id` when the embeddings hold only config.vocab_size rows.
// `source` names what produced the id, e.g. "tokenizer.json: added token \"<mask>\"".
void check_vocab_covers(const HfConfig& config, int64_t max_token_id, std::string_view source);

}  // namespace stoke
