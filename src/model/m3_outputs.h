// bge-m3's per-token head outputs (EncoderOutputs::sparse_weights, ::colbert)
// turned into each text's results on the host, exactly as FlagEmbedding 1.3.5
// does after its forward (inference/embedder/encoder_only/m3.py,
// M3Embedder.encode_single_device):
//
//   _process_token_weights(token_weights, input_ids):
//     result = defaultdict(int)
//     for w, idx in zip(token_weights, input_ids):
//       if idx not in unused_tokens and w > 0 and w > result[idx]: result[idx] = w
//   -> each token id once, with the MAX weight of its tokens; only weights > 0
//      (the ReLU's zeros are dropped, nothing is rounded: the float32 weight as
//      the model computed it); the ids of the tokenizer's cls, eos, pad and unk
//      tokens never appear (mask and every other special token do).
//   _process_colbert_vecs(colbert_vecs, attention_mask):
//     colbert_vecs[:tokens_num - 1], colbert_vecs = colbert_linear(h[:, 1:]) * mask
//   -> the vectors of tokens 1 .. n - 1 of an n-token sequence: every token but
//      the first (CLS), the last one (EOS) kept; each normalized
//      (F.normalize, normalize_embeddings=True by default).
//   dense: h[:, 0] (pooling "cls"), normalized — the sentence-transformers path
//      (modules.json Pooling cls + Normalize) already computes it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "model/packed_batch.h"
#include "text/tokenizer.h"

namespace stoke {

// The ids FlagEmbedding leaves out of lexical weights: those of the
// tokenizer's cls_token, eos_token, pad_token and unk_token, sorted. It takes
// them from transformers' tokenizer.special_tokens_map, so they are read as
// transformers 4 loads them: tokenizer_config.json's entries (a string, or an
// object's "content"); special_tokens_map.json's over them only for a legacy
// config without "added_tokens_decoder"; for a key neither file sets, the
// tokenizer class's default (XLMRobertaTokenizer: <s>, </s>, <pad>, <unk>;
// BertTokenizer: [CLS], [PAD], [UNK] and no eos token — its [SEP] stays).
// A token the vocabulary lacks maps to the unk id (convert_tokens_to_ids).
std::vector<int32_t> m3_unused_token_ids(const std::filesystem::path& model_folder, const Tokenizer& tokenizer);

// One text's lexical weights: distinct token ids, ascending, each with its
// weight (> 0) — FlagEmbedding's dict {str(id): weight} in a fixed order,
// ready for a CSR row (io/csr_shard.h).
struct LexicalWeights {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

// One sequence: its token ids and their per-token weights (its rows of
// EncoderOutputs::sparse_weights); unused_ids sorted (m3_unused_token_ids).
LexicalWeights lexical_weights(std::span<const int32_t> token_ids, std::span<const float> token_weights,
                               std::span<const int32_t> unused_ids);

// Every sequence of a batch, in batch order.
std::vector<LexicalWeights> batch_lexical_weights(const PackedBatch& batch, std::span<const float> sparse_weights,
                                                  std::span<const int32_t> unused_ids);

// Sequence b's ColBERT vectors within the batch's (T, D) output: rows
// cu_seqlens[b] + 1 .. cu_seqlens[b + 1] - 1, i.e. count = n - 1 vectors
// starting at `first` (0 vectors for an empty sequence).
struct TokenRows {
  int64_t first = 0, count = 0;
};
TokenRows colbert_rows(const PackedBatch& batch, int64_t b);
// The same rows as a span of the batch output (colbert: T * dim floats).
std::span<const float> colbert_vectors(const PackedBatch& batch, int64_t b, std::span<const float> colbert, int64_t dim);

}  // namespace stoke
