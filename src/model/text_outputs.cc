#include "model/text_outputs.h"

#include "core/error.h"

namespace stoke {

const char* text_role_name(TextRole role) { return role == TextRole::query ? "query" : "document"; }

const char* sparse_source_name(SparseSource s) {
  switch (s) {
    case SparseSource::m3: return "bge-m3";
    case SparseSource::splade: return "splade";
    case SparseSource::none: break;
  }
  return "none";
}

const char* multi_vector_source_name(MultiVectorSource s) {
  switch (s) {
    case MultiVectorSource::m3: return "bge-m3";
    case MultiVectorSource::colbert: return "colbert";
    case MultiVectorSource::none: break;
  }
  return "none";
}

TextOutputSources text_output_sources(const LoadedEncoder& encoder, int64_t vocab_size) {
  TextOutputSources s;
  if (encoder.m3.has_sparse()) s.sparse = SparseSource::m3;
  if (encoder.m3.has_colbert()) {
    s.multi_vector = MultiVectorSource::m3;
    s.colbert_dim = encoder.m3.colbert_dim();
  }
  if (s.sparse != SparseSource::none) s.sparse_columns = vocab_size;
  return s;
}

size_t sparse_host_floats(const LoadedEncoder& encoder, const TextOutputSettings& s, int64_t max_tokens,
                          int64_t /*max_sequences*/) {
  if (!s.sparse) return 0;
  if (encoder.m3.has_sparse()) return static_cast<size_t>(max_tokens);  // (T): one weight per token
  throw Error(Errc::invalid_argument, "this model has no sparse output");
}

size_t colbert_host_floats(const LoadedEncoder& encoder, const TextOutputSettings& s, int64_t max_tokens) {
  if (!s.colbert) return 0;
  if (encoder.m3.has_colbert()) return static_cast<size_t>(max_tokens * encoder.m3.colbert_dim());  // (T, D)
  throw Error(Errc::invalid_argument, "this model has no ColBERT output");
}

void set_text_output_destinations(const LoadedEncoder& encoder, const TextOutputSettings& s, EncoderOutputs& out,
                                  float* sparse_host, float* colbert_host) {
  if (s.sparse && encoder.m3.has_sparse()) out.sparse_weights = sparse_host;
  if (s.colbert && encoder.m3.has_colbert()) out.colbert = colbert_host;
}

TextExtras text_extras(const LoadedEncoder& encoder, const TextOutputSettings& s, std::span<const int32_t> ids,
                       int64_t first_token, int64_t /*sequence*/, const float* sparse_host, const float* colbert_host) {
  TextExtras x;
  if (s.sparse && encoder.m3.has_sparse())
    x.sparse = lexical_weights(ids, std::span<const float>(sparse_host + first_token, ids.size()), s.unused_ids);
  if (s.colbert && encoder.m3.has_colbert()) {
    // Every token but the first (CLS), as FlagEmbedding keeps them.
    const auto D = static_cast<size_t>(encoder.m3.colbert_dim());
    const size_t n = ids.empty() ? 0 : ids.size() - 1;
    const float* from = colbert_host + (static_cast<size_t>(first_token) + 1) * D;
    x.colbert.assign(from, from + n * D);
  }
  return x;
}

}  // namespace stoke
