// PyLate's ColBERT models (the sentence-transformers layout PyLate saves):
// what stoke reads from the folder, how a text becomes the ids PyLate feeds
// its encoder, and which of the per-token vectors it returns — exactly as
// pylate 1.6.0 does (models/colbert.py, models/Dense.py; sentence-transformers
// 5.3.0's Transformer.tokenize underneath):
//
// The folder (ColBERT.save): modules.json = Transformer ("") then one or more
//   pylate.models.Dense.Dense (1_Dense/, ...): no Pooling, no Normalize.
//   Each Dense is sentence-transformers' Dense applied to EVERY token,
//   token_embeddings (T, H) -> act(x W^T + b) (T, D): config.json
//   in_features, out_features, bias (ColBERT's default false),
//   activation_function (default torch.nn.modules.linear.Identity: PyLate's
//   Dense defaults to nn.Identity, not Tanh), use_residual (refused when
//   true). config_sentence_transformers.json: "model_type": "ColBERT" and the
//   settings below; a setting it lacks takes PyLate's default.
// Settings (ColBERT.__init__ after _load_sbert_model):
//   query_prefix "[Q] ", document_prefix "[D] " ("" = no prefix). They are
//     added to the tokenizer as (non-special) added tokens — the saved
//     tokenizer holds them — and enter as ONE token id
//     (tokenizer.convert_tokens_to_ids(prefix)) inserted right after the first
//     token ([CLS]): insert_prefix_token. Never text prepended.
//   query_length 32, document_length 180: the whole sequence's length, prefix
//     included. Transformer.max_seq_length = length - 1 with a prefix (length
//     without), the text tokenized with truncation="longest_first" to that,
//     special tokens in, then the prefix inserted: at most `length` ids.
//   do_query_expansion true: queries tokenized with padding="max_length", the
//     tokenizer's pad token set to its MASK token (mask_token_id; else EOS;
//     stoke refuses a tokenizer with neither): every query is exactly
//     query_length ids, [CLS] [Q] text... [SEP] [MASK]... (token type 0).
//   attend_to_expansion_tokens false: the attention mask is 0 on the
//     [MASK]s, so in every layer they are queries, not keys (they attend to
//     the real tokens; no token attends to them). true (or expansion off):
//     every token a key (the mask filled with 1). Positions count them as
//     ordinary tokens (BERT: 0 .. L-1).
//   skiplist_words: string.punctuation's 32 characters; each mapped with
//     convert_tokens_to_ids (a word the vocabulary lacks maps to the UNK
//     id, which is then skipped too).
// Outputs (encode(normalize_embeddings=True), output_value "token_embeddings"):
//   documents: every token whose id is not in the skiplist ([CLS], [D], [SEP]
//     kept; batch padding never), each vector L2-normalized
//     (F.normalize: x / max(||x||, 1e-12)).
//   queries with expansion: all query_length vectors ([MASK]s included, even
//     unattended); without: the real tokens (the attention mask's 1s).
//   pool_factor (hierarchical pooling of document vectors): 1, none.
// Not read: prompts (a default_prompt_name with a non-empty prompt is
// refused), similarity_fn_name (MaxSim: model/maxsim.h), stanford-nlp folders
// (HF_ColBERT, artifact.metadata: no modules.json).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/model_folder.h"
#include "model/encoder_params.h"
#include "text/tokenizer.h"

namespace stoke {

struct ColbertSettings {
  std::string query_prefix = "[Q] ", document_prefix = "[D] ";
  int32_t query_prefix_id = -1, document_prefix_id = -1;  // -1: no prefix ("")
  int64_t query_length = 32, document_length = 180;
  bool do_query_expansion = true;
  bool attend_to_expansion_tokens = false;  // false whenever do_query_expansion is
  std::vector<std::string> skiplist_words;
  std::vector<int32_t> skiplist_ids;  // sorted, unique
  int32_t mask_id = -1;               // queries' expansion token
  bool present() const { return query_length > 0 && mask_id >= 0; }
};

// Reads config_sentence_transformers.json of a ColBERT folder (PyLate's
// defaults for what it lacks; PyLate saves it beside config.json, in
// model_dir) and resolves the ids through `tokenizer` and model_dir's
// tokenizer_config.json. Throws Error naming the file and field: a prefix
// the tokenizer does not hold as a token, a length that is not a positive
// integer or exceeds the model's usable positions, no mask token for query
// expansion, a default prompt.
ColbertSettings read_colbert_settings(const std::filesystem::path& model_dir, const HfConfig& config,
                                      const Tokenizer& tokenizer);

// PyLate's ids of a text (a query or a document), as described above.
// encode's max_length is replaced by the role's length; truncation always.
Encoding colbert_encode(const Tokenizer& tokenizer, const ColbertSettings& s, bool query, std::string_view text,
                        const EncodeOptions& encode, EncodeStats* stats = nullptr);

// How many of a query's ids are attention keys: the ids up to and including
// its last non-[MASK] id (the template's closing [SEP] precedes the
// expansion tokens); the whole length when every token is a key.
int32_t colbert_query_keys(std::span<const int32_t> ids, const ColbertSettings& s);

// Whether the vector of token `id` is part of the text's output.
bool colbert_keeps(const ColbertSettings& s, bool query, int32_t id);

// The ColBERT projection: the folder's Dense modules (folder.st.dense of a
// ColBERT folder) placed on the backend as per-token modules
// (encoder.colbert_dense; load_dense_modules's checks).
void load_colbert_modules(LoadedEncoder& encoder, const ModelFolder& folder, Backend& backend);

}  // namespace stoke
