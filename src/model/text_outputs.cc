#include "model/text_outputs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "model/m3_heads.h"
#include "model/splade_head.h"

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
  if (!encoder.colbert_dense.empty()) {  // PyLate: per-token vectors, no sentence vector
    s.multi_vector = MultiVectorSource::colbert;
    s.colbert_dim = encoder.colbert_dense.back().w.dim(0);
    s.dense = false;
  }
  if (s.sparse != SparseSource::none) s.sparse_columns = vocab_size;
  if (encoder.splade.present()) {  // a SparseEncoder: its rows are the MLM vocabulary's, and it has no dense vector
    s.sparse = SparseSource::splade;
    s.sparse_columns = encoder.splade.vocab();
    s.dense = false;
  }
  return s;
}

void load_text_output_heads(LoadedEncoder& encoder, const ModelFolder& folder, Backend& backend) {
  const M3HeadFiles m3 = find_m3_heads(folder.model_dir);
  if ((m3.sparse || m3.colbert) && !encoder.m3.has_sparse() && !encoder.m3.has_colbert())
    load_m3_heads(encoder, folder.model_dir, backend);
  if (folder.st.splade && !encoder.splade.present()) load_splade_head(encoder, folder, backend);
}

TextOutputSettings text_output_settings(const LoadedEncoder& encoder, const std::filesystem::path& model_dir,
                                        const Tokenizer& tokenizer, bool sparse, bool colbert, TextRole role,
                                        int64_t sparse_top_k) {
  const TextOutputSources src = text_output_sources(encoder, tokenizer.vocab_size());
  TextOutputSettings all;
  if (src.sparse == SparseSource::m3) all.unused_ids = m3_unused_token_ids(model_dir, tokenizer);
  if (src.multi_vector == MultiVectorSource::colbert)
    all.colbert_model = read_colbert_settings(model_dir, encoder.config, tokenizer);
  return text_output_choice(encoder, all, src, sparse, colbert, role, sparse_top_k);
}

TextOutputSettings text_output_choice(const LoadedEncoder& encoder, TextOutputSettings s, const TextOutputSources& src,
                                      bool sparse, bool colbert, TextRole role, int64_t sparse_top_k) {
  if (sparse && src.sparse == SparseSource::none)
    throw Error(Errc::invalid_argument, "this model gives no sparse output (bge-m3 with " + std::string(kSparseHeadFile) +
                                            ", or a SPLADE sparse encoder, does)");
  if (colbert && src.multi_vector == MultiVectorSource::none)
    throw Error(Errc::invalid_argument, "this model gives no ColBERT vectors (bge-m3 with " +
                                            std::string(kColbertHeadFile) + ", or a ColBERT model, does)");
  if (sparse_top_k < 0) throw Error(Errc::invalid_argument, "sparse top-k: expected 0 (all) or more");
  s.sparse = sparse;
  s.colbert = colbert;
  s.role = role;
  s.sparse_top_k = sparse_top_k;
  s.static_query = sparse && role == TextRole::query && !encoder.splade.static_query.empty();
  return s;
}

size_t sparse_host_floats(const LoadedEncoder& encoder, const TextOutputSettings& s, int64_t max_tokens,
                          int64_t max_sequences) {
  if (!s.sparse) return 0;
  if (encoder.m3.has_sparse()) return static_cast<size_t>(max_tokens);  // (T): one weight per token
  if (s.static_query) return 0;  // rows from the tokens alone
  if (encoder.splade.present()) return static_cast<size_t>(max_sequences * encoder.splade.vocab());  // (B, V)
  throw Error(Errc::invalid_argument, "this model has no sparse output");
}

size_t colbert_host_floats(const LoadedEncoder& encoder, const TextOutputSettings& s, int64_t max_tokens) {
  if (!s.colbert) return 0;
  if (encoder.m3.has_colbert()) return static_cast<size_t>(max_tokens * encoder.m3.colbert_dim());  // (T, D)
  if (!encoder.colbert_dense.empty())
    return static_cast<size_t>(max_tokens * encoder.colbert_dense.back().w.dim(0));  // (T, D)
  throw Error(Errc::invalid_argument, "this model has no ColBERT output");
}

void set_text_output_destinations(const LoadedEncoder& encoder, const TextOutputSettings& s, EncoderOutputs& out,
                                  float* sparse_host, float* colbert_host) {
  if (s.sparse && encoder.m3.has_sparse()) out.sparse_weights = sparse_host;
  if (s.sparse && encoder.splade.present() && !s.static_query) out.splade = sparse_host;
  if (s.colbert && (encoder.m3.has_colbert() || !encoder.colbert_dense.empty())) out.colbert = colbert_host;
}

Encoding text_encoding(const Tokenizer& tokenizer, const TextOutputSettings& s, const TextInput& input,
                       const EncodeOptions& options, EncodeStats* stats) {
  if (s.static_query) {  // inference-free SPLADE's queries: SparseStaticEmbedding.preprocess
    if (input.pair) throw Error(Errc::invalid_argument, "a SPLADE model encodes single texts, not pairs");
    return static_query_encoding(tokenizer, input.text, stats);
  }
  if (!s.colbert_model.present()) return tokenizer.encode(input, options, stats);
  if (input.pair)
    throw Error(Errc::invalid_argument, "a ColBERT model encodes single texts, not pairs");
  return colbert_encode(tokenizer, s.colbert_model, s.role == TextRole::query, input.text, options, stats);
}

void text_key_lens(const TextOutputSettings& s, std::span<const int32_t> ids, std::span<const int32_t> cu_seqlens,
                   std::vector<int32_t>& key_lens) {
  key_lens.clear();
  const ColbertSettings& c = s.colbert_model;
  if (!c.present() || s.role != TextRole::query || !c.do_query_expansion || c.attend_to_expansion_tokens) return;
  for (size_t b = 0; b + 1 < cu_seqlens.size(); ++b) {
    const auto first = static_cast<size_t>(cu_seqlens[b]), end = static_cast<size_t>(cu_seqlens[b + 1]);
    key_lens.push_back(first == end ? 0 : colbert_query_keys(ids.subspan(first, end - first), c));
  }
}

namespace {

// sentence-transformers' max_active_dims (util/tensor.py select_max_active_dims):
// the k weights largest in absolute value stay, the rest become 0. It takes
// torch.topk, whose order among equal values is not defined; stoke keeps the
// lower token id of a tie, so the result does not depend on the machine.
void keep_top_k(LexicalWeights& w, int64_t k) {
  if (k <= 0 || static_cast<int64_t>(w.ids.size()) <= k) return;
  std::vector<size_t> order(w.ids.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::abs(w.weights[a]) > std::abs(w.weights[b]);  // stable: ascending ids (the lower id) among equals
  });
  order.resize(static_cast<size_t>(k));
  std::sort(order.begin(), order.end());  // back to ascending ids
  LexicalWeights kept;
  for (size_t i : order) {
    kept.ids.push_back(w.ids[i]);
    kept.weights.push_back(w.weights[i]);
  }
  w = std::move(kept);
}

// A SPLADE text's row (V floats): its non-zero entries, ascending ids, as
// SparseEncoder.encode's sparse tensor holds them.
LexicalWeights splade_row(const float* row, int64_t V) {
  LexicalWeights w;
  for (int64_t v = 0; v < V; ++v)
    if (row[v] != 0.0f) {
      w.ids.push_back(static_cast<int32_t>(v));
      w.weights.push_back(row[v]);
    }
  return w;
}

}  // namespace

TextExtras text_extras(const LoadedEncoder& encoder, const TextOutputSettings& s, std::span<const int32_t> ids,
                       int64_t first_token, int64_t sequence, const float* sparse_host, const float* colbert_host) {
  TextExtras x;
  if (s.sparse && encoder.m3.has_sparse())
    x.sparse = lexical_weights(ids, std::span<const float>(sparse_host + first_token, ids.size()), s.unused_ids);
  if (s.sparse && s.static_query) {
    x.sparse = static_query_row(ids, encoder.splade.static_query);
  } else if (s.sparse && encoder.splade.present()) {
    const int64_t V = encoder.splade.vocab();
    x.sparse = splade_row(sparse_host + sequence * V, V);
  }
  if (s.sparse) keep_top_k(x.sparse, s.sparse_top_k);
  if (s.colbert && encoder.m3.has_colbert()) {
    // Every token but the first (CLS), as FlagEmbedding keeps them.
    const auto D = static_cast<size_t>(encoder.m3.colbert_dim());
    const size_t n = ids.empty() ? 0 : ids.size() - 1;
    const float* from = colbert_host + (static_cast<size_t>(first_token) + 1) * D;
    x.colbert.assign(from, from + n * D);
  }
  if (s.colbert && !encoder.colbert_dense.empty()) {
    // PyLate's: a document's tokens but its skiplist ones; every token of a
    // query (model/colbert_model.h).
    const auto D = static_cast<size_t>(encoder.colbert_dense.back().w.dim(0));
    const bool query = s.role == TextRole::query;
    for (size_t t = 0; t < ids.size(); ++t)
      if (colbert_keeps(s.colbert_model, query, ids[t])) {
        const float* from = colbert_host + (static_cast<size_t>(first_token) + t) * D;
        x.colbert.insert(x.colbert.end(), from, from + D);
      }
  }
  return x;
}

}  // namespace stoke
