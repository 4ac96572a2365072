// A SPLADE sparse encoder's head: the masked-LM head of a *ForMaskedLM
// checkpoint and sentence-transformers' SpladePooling (6.2.0,
// sparse_encoder/modules/splade_pooling.py), computed on the device.
//
// What sentence-transformers does (MLMTransformer -> SpladePooling.forward):
//   logits = AutoModelForMaskedLM(...).logits               (B, S, V)
//   w = log1p(relu(logits * attention_mask))                (log1p twice for "log1p_relu")
//   embedding = max over the sequence (pooling_strategy "max"; "sum": the sum)
// The mask multiplies padding logits by 0 before relu, so padding adds 0 —
// nothing, since w >= 0 and every text has its special tokens. stoke runs
// packed tokens (no padding) and pools each text's own rows: the same numbers.
// encode() then keeps the non-zero entries of each row (model/text_outputs.h).
//
// The MLM head, as transformers computes it (f32 here whatever --precision):
//   BertForMaskedLM:       cls.predictions.transform.dense (H, H) + bias, config hidden_act (GELU, erf),
//                          cls.predictions.transform.LayerNorm (eps layer_norm_eps), then the decoder
//                          (V, H): the word embeddings when tie_word_embeddings (the default), else
//                          cls.predictions.decoder.weight; bias cls.predictions.bias (or .decoder.bias)
//   DistilBertForMaskedLM: vocab_transform (H, H), activation (GELU), vocab_layer_norm (eps 1e-12),
//                          vocab_projector (tied the same way; its bias vocab_projector.bias)
// Other architectures (ModernBertForMaskedLM, RoBERTa's lm_head, ...) are refused by name.
//
// Memory: the (T, V) logits of a whole batch would be large (16k tokens x a
// 30522-id vocabulary = 2 GB), so the decoder GEMM runs on row blocks of the
// tokens, each pooled into the (B, V) result at once (splade_pool with
// Accumulate::yes after the first): the block buffer stays within
// kSpladeBlockBytes.
#pragma once

#include <cstdint>
#include <filesystem>

#include <span>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "io/model_folder.h"
#include "model/encoder_params.h"
#include "model/m3_outputs.h"
#include "text/tokenizer.h"

namespace stoke {

inline constexpr int64_t kSpladeBlockBytes = int64_t{64} << 20;  // the (rows, V) f32 logits block

// Token rows per decoder block for vocabulary V: as many as kSpladeBlockBytes
// holds, at least 1, at most max_tokens.
int64_t splade_block_rows(int64_t vocab, int64_t max_tokens);

// Reads the MLM head of a SPLADE folder (folder.st.splade set: config.json
// and the weights already in encoder.weights) and places it, f32, in
// encoder.splade with its SpladePooling (one wait for the copies, at load
// time); an inference-free one's query weights too (static_query_weights).
// Throws Error naming the file and tensor or field: an architecture whose MLM
// head stoke does not run, a missing tensor, a wrong shape or dtype, a
// SpladePooling embedding_dimension that is not the vocabulary size.
void load_splade_head(LoadedEncoder& encoder, const ModelFolder& folder, Backend& backend);

// The query route of an inference-free SPLADE folder (sentence-transformers'
// SparseStaticEmbedding, 6.2.0): <query folder>/model.safetensors "weight"
// [V], any float dtype, V the document side's vocabulary; its tokenizer must
// be the document side's (tokenizer.json and tokenizer_config.json the same
// bytes: stoke runs one tokenizer). A query's row: for each distinct id of
// its tokens (tokenized without special tokens, truncated at the tokenizer's
// model_max_length), weight[id]; zeros dropped.
std::vector<float> static_query_weights(const ModelFolder& folder, int64_t vocab);

// One query's sparse row from its token ids (the Encoding static_query_encoding
// gives): distinct ids ascending, each with weight[id], zeros left out.
LexicalWeights static_query_row(std::span<const int32_t> ids, std::span<const float> weights);

// A query's token ids as SparseStaticEmbedding.preprocess makes them:
// tokenizer(text, add_special_tokens=False, truncation=True) — no template,
// cut at the tokenizer's model_max_length (none when it has none), type ids 0.
Encoding static_query_encoding(const Tokenizer& tokenizer, std::string_view text, EncodeStats* stats = nullptr);

// Scratch of one forward: the transformed hidden states and one logits block.
struct SpladeViews {
  TensorView transformed;  // (T, H) f32
  TensorView block;        // (rows, V) f32: rows = the block height
};

// Enqueues the head on the last hidden state h (T, H) f32 of the batch that
// cu_seqlens (B + 1) delimits: out (B, V) f32 = each text's pooled weights.
void splade_head_forward(const Ops& ops, const SpladeHeadParams& head, const TensorView& h, const TensorView& cu_seqlens,
                         const SpladeViews& scratch, const TensorView& out);

}  // namespace stoke
