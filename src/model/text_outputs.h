// A model's per-text outputs beyond the pooled vector — sparse lexical
// weights and multi-vectors (ColBERT) — whatever computes them: bge-m3's
// heads (model/m3_heads.h), a SPLADE MLM head, a PyLate ColBERT projection.
// The one place the embed pipeline, the request batcher (serve, Python) and
// the jobs ask what a model can give and turn one batch's host copies into
// each text's results: a new source is one branch here, not one per caller.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "io/model_folder.h"
#include "model/encoder.h"
#include "model/colbert_model.h"
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
  // Whether the model has a dense sentence vector at all (a SPLADE or
  // ColBERT model has none: its pooled row would be a made-up one).
  bool dense = true;
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
  // Inference-free SPLADE, role query (model/splade_head.h): a query is
  // tokenized without special tokens and its row is the static weights of its
  // ids — no forward. Set by text_output_settings.
  bool static_query = false;
  // A ColBERT model's (PyLate) prefixes, lengths, expansion and skiplist
  // (model/colbert_model.h): set for such a model whatever was asked, since
  // they shape its ids (text_encoding); absent (not present()) otherwise.
  ColbertSettings colbert_model;
};

// Loads every sparse / multi-vector head the folder has — bge-m3's
// sparse_linear.pt / colbert_linear.pt, a SPLADE sparse encoder's MLM head
// (and an inference-free one's query weights: model/splade_head.h) — for a
// caller that serves whatever a request asks (serve, Python); `stoke embed`
// loads only those --outputs names.
void load_text_output_heads(LoadedEncoder& encoder, const ModelFolder& folder, Backend& backend);

// The settings for a model folder: bge-m3's unused ids read from its
// tokenizer files (m3_unused_token_ids) when sparse is asked. Throws
// Error(invalid_argument) naming what the model lacks when it cannot give an
// output asked for.
TextOutputSettings text_output_settings(const LoadedEncoder& encoder, const std::filesystem::path& model_dir,
                                        const Tokenizer& tokenizer, bool sparse, bool colbert,
                                        TextRole role = TextRole::document, int64_t sparse_top_k = 0);

// A call's choices on settings read once (text_output_settings with every
// output the model gives: serve and Python keep one and choose per request);
// the same refusals. `src` is text_output_sources(encoder, ...).
TextOutputSettings text_output_choice(const LoadedEncoder& encoder, TextOutputSettings read_once,
                                      const TextOutputSources& src, bool sparse, bool colbert, TextRole role,
                                      int64_t sparse_top_k);

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

// The ids the encoder runs for a text: the tokenizer's, or a ColBERT
// model's form for the role (colbert_encode). The one place the pipeline
// and the request batcher tokenize a text.
Encoding text_encoding(const Tokenizer& tokenizer, const TextOutputSettings& s, const TextInput& input,
                       const EncodeOptions& options, EncodeStats* stats = nullptr);

// The attention key count of each sequence of a packed batch (its ids one
// after another, batch.cu_seqlens), into `key_lens`; left empty when every
// token is a key — all but a ColBERT model's queries with unattended
// expansion tokens (colbert_query_keys). For EncoderOutputs::key_lens.
void text_key_lens(const TextOutputSettings& s, std::span<const int32_t> ids, std::span<const int32_t> cu_seqlens,
                   std::vector<int32_t>& key_lens);

// Text `sequence` of a collected batch: its token ids as the encoder ran
// them, the batch row of its first token, and the host buffers above.
TextExtras text_extras(const LoadedEncoder& encoder, const TextOutputSettings& s, std::span<const int32_t> ids,
                       int64_t first_token, int64_t sequence, const float* sparse_host, const float* colbert_host);

}  // namespace stoke
