// A model's per-text outputs beyond the pooled vector — sparse lexical
// weights and multi-vectors (ColBERT) — whatever computes them: bge-m3's
// heads (model/m3_heads.h), a SPLADE MLM head, a PyLate ColBERT projection.
// The one place the embed pipeline, the request batcher (serve, Python) and
// the jobs ask what a model can give and turn one batch's host copies into
// each text's results: a new source is one branch here, not one per caller.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/encoder.h"
#include "model/m3_outputs.h"

namespace stoke {

// Which side of retrieval a text is on. ColBERT models prefix and expand
// queries and drop skiplist tokens of documents; inference-free SPLADE
// encodes queries without the encoder. Other models ignore it.
enum class TextRole { document, query };
const char* text_role_name(TextRole role);  // "document", "query"

enum class SparseSource { none, m3, splade };
enum class MultiVectorSource { none, m3, colbert };

// What a loaded model can give.
struct TextOutputSources {
  SparseSource sparse = SparseSource::none;
  MultiVectorSource multi_vector = MultiVectorSource::none;
  int64_t colbert_dim = 0;     // width of each multi-vector (0: none)
  int64_t sparse_columns = 0;  // the sparse vectors' width: the vocabulary size
};
TextOutputSources text_output_sources(const LoadedEncoder& encoder, int64_t vocab_size);
const char* sparse_source_name(SparseSource s);       // "none", "bge-m3", "splade"
const char* multi_vector_source_name(MultiVectorSource s);  // "none", "bge-m3", "colbert"

// What a caller asked for, and how the raw outputs become each text's.
struct TextOutputSettings {
  bool sparse = false, colbert = false;
  TextRole role = TextRole::document;
  std::vector<int32_t> unused_ids;  // bge-m3: token ids never in lexical weights, sorted (m3_unused_token_ids)
  int64_t sparse_top_k = 0;         // keep the k largest weights of a text (0: all)
};

// Host floats one batch's raw outputs need (per output slot), for a runner
// of max_tokens tokens and max_sequences sequences; 0 when not asked.
size_t sparse_host_floats(const LoadedEncoder& encoder, const TextOutputSettings& s, int64_t max_tokens,
                          int64_t max_sequences);
size_t colbert_host_floats(const LoadedEncoder& encoder, const TextOutputSettings& s, int64_t max_tokens);

// Points the runner's outputs at the host buffers (either may be nullptr
// when not asked): the fields the model's sources fill.
void set_text_output_destinations(const LoadedEncoder& encoder, const TextOutputSettings& s, EncoderOutputs& out,
                                  float* sparse_host, float* colbert_host);

// One text's results.
struct TextExtras {
  LexicalWeights sparse;       // ascending ids, weights > 0
  std::vector<float> colbert;  // vectors x colbert_dim, row-major
};

// Text `sequence` of a collected batch: its token ids as the encoder ran
// them, the batch row of its first token, and the host buffers above.
TextExtras text_extras(const LoadedEncoder& encoder, const TextOutputSettings& s, std::span<const int32_t> ids,
                       int64_t first_token, int64_t sequence, const float* sparse_host, const float* colbert_host);

}  // namespace stoke
