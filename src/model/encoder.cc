#include "model/encoder.h"

#include <algorithm>
#include <cstring>
#include <variant>

#include "core/error.h"
#include "model/decoder_family.h"
#include "model/m3_heads.h"
#include "model/post_ln_family.h"
#include "model/prenorm_family.h"
#include "model/splade_head.h"

namespace stoke {

namespace {

// One callable of a lambda per alternative: std::visit picks the family's.
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

EncoderRunner::EncoderRunner(const LoadedEncoder& encoder, Backend& backend, int64_t max_tokens,
                             int64_t max_sequences, size_t staging_slots, int64_t max_spans, int64_t max_span_rows)
    : enc_(encoder),
      backend_(backend),
      max_tokens_(max_tokens),
      max_sequences_(max_sequences),
      max_spans_(std::max<int64_t>(max_spans, 0)),
      max_span_rows_(std::max<int64_t>(max_span_rows, 0)),
      staging_(staging_slots < 1 ? 1 : staging_slots) {
  if (max_tokens <= 0 || max_sequences <= 0) throw Error(Errc::invalid_argument, "encoder workspace must be positive");
  const HfConfig& c = enc_.config;
  const size_t T = static_cast<size_t>(max_tokens);
  // Pooled rows: one per sequence, or one per span under late chunking.
  const size_t B = static_cast<size_t>(std::max(max_sequences, max_spans_));
  const size_t H = static_cast<size_t>(c.hidden_size);
  const size_t C = static_cast<size_t>(std::max<int64_t>(c.num_labels(), 1));
  const size_t act = dtype_size(enc_.dtype);
  ids_ = backend_.allocate(T * 4);
  types_ = backend_.allocate(T * 4);
  positions_ = backend_.allocate(T * 4);
  cu_ = backend_.allocate((B + 1) * 4);
  cls_rows_ = backend_.allocate(B * 4);
  h_ = backend_.allocate(T * H * 4);          // (T, H) f32 residual stream, updated in place
  if (!enc_.params.emb_proj_w.empty())
    emb_ = backend_.allocate(T * static_cast<size_t>(c.embedding_size) * 4);  // (T, E) f32 before the projection
  if (enc_.dtype != DType::f32)
    h_low_ = backend_.allocate(T * H * act);  // (T, H) the same in the compute dtype: GEMM input
  // The layer family's workspace (its unit's: all (T, ·), and what else its sequence reads).
  switch (c.arch->family) {
    case LayerFamily::post_ln_encoder:
      layers_.emplace<PostLnBuffers>(backend_, c, enc_.dtype, T);
      break;
    case LayerFamily::prenorm_encoder:
      layers_.emplace<PrenormBuffers>(backend_, c, enc_.dtype, T, B);
      break;
    case LayerFamily::decoder:
      layers_.emplace<DecoderBuffers>(backend_, c, enc_.dtype, T);
      break;
  }
  head_a_ = backend_.allocate(B * H * 4);     // (B, H) first-token rows (f32)
  head_b_ = backend_.allocate(B * H * 4);     // (B, H) pooler / head dense output (f32)
  pooled_ = backend_.allocate(B * H * 4);     // (B, H) f32
  // sentence-transformers Dense modules: (B, out) each, ping-pong.
  size_t widest = H;
  for (const DenseLayerParams& d : enc_.dense) widest = std::max(widest, static_cast<size_t>(d.w.dim(0)));
  if (!enc_.dense.empty()) {
    dense_a_ = backend_.allocate(B * widest * 4);
    dense_b_ = backend_.allocate(B * widest * 4);
  }
  pooled_dims_ = backend_.allocate(B * widest * 4);  // (B, dims) the first dims columns
  logits_ = backend_.allocate(B * C * 4);     // (B, C) f32
  // MPNet: the relative-position buckets of every distance up to P - 1 (a
  // batch's max_seqlen M uses the middle 2M - 1 of them), copied once, and
  // the per-head bias gathered from them per batch.
  if (!enc_.params.rel_bias.empty()) {
    rel_bucket_host_ = relative_position_buckets(static_cast<int>(c.max_position_embeddings),
                                                 c.relative_attention_num_buckets);
    const size_t R = rel_bucket_host_.size();
    rel_buckets_ = backend_.allocate(R * 4);                                              // (2P - 1) i32
    rel_ = backend_.allocate(R * static_cast<size_t>(c.num_attention_heads) * 4);          // (2P - 1, heads) f32
    backend_.copy_to_device(rel_buckets_->data(), rel_bucket_host_.data(), R * 4);  // reads the member later
  }
  if (max_spans_ > 0) {
    span_h_ = backend_.allocate(static_cast<size_t>(max_span_rows_) * H * 4);
    span_rows_ = backend_.allocate(static_cast<size_t>(max_span_rows_) * 4);
    span_cu_ = backend_.allocate(static_cast<size_t>(max_spans_ + 1) * 4);
  }
  // bge-m3's per-token heads (model/m3_heads.h), when the model has them.
  if (enc_.m3.has_sparse()) m3_sparse_ = backend_.allocate(T * 4);  // (T) f32
  if (enc_.m3.has_colbert())
    m3_colbert_ = backend_.allocate(T * static_cast<size_t>(enc_.m3.colbert_dim()) * 4);  // (T, D) f32
  // A ColBERT model's projection (model/colbert_model.h): (T, out) per Dense module, ping-pong.
  if (!enc_.colbert_dense.empty()) {
    size_t out_cols = 0;
    for (const DenseLayerParams& d : enc_.colbert_dense) out_cols = std::max(out_cols, static_cast<size_t>(d.w.dim(0)));
    colbert_a_ = backend_.allocate(T * out_cols * 4);
    if (enc_.colbert_dense.size() > 1) colbert_b_ = backend_.allocate(T * out_cols * 4);
  }
  key_lens_ = backend_.allocate(B * 4);  // (B) i32 attention key counts (EncoderOutputs::key_lens)
  // A SPLADE model's head: the logits block bounded by kSpladeBlockBytes.
  if (enc_.splade.present()) {
    const size_t V = static_cast<size_t>(enc_.splade.vocab());
    splade_rows_ = stoke::splade_block_rows(enc_.splade.vocab(), max_tokens);
    splade_t_ = backend_.allocate(T * H * 4);                                  // (T, H) f32
    splade_block_ = backend_.allocate(static_cast<size_t>(splade_rows_) * V * 4);  // (rows, V) f32
    splade_out_ = backend_.allocate(B * V * 4);                                // (B, V) f32
  }
  const size_t span_words = max_spans_ > 0 ? static_cast<size_t>(max_span_rows_ + max_spans_ + 1) : 0;
  // ids, types, positions (T each), cu (B + 1), first rows (B), spans, key counts (B).
  for (auto& s : staging_) s.host = backend_.allocate_host((3 * T + 3 * B + 1 + span_words) * 4);
  graphs_on_ = backend_.can_capture();
}

EncoderRunner::~EncoderRunner() { backend_.drain(); }

void EncoderRunner::set_splade_block_rows(int64_t rows) {
  if (!enc_.splade.present()) return;
  const int64_t sized = stoke::splade_block_rows(enc_.splade.vocab(), max_tokens_);
  if (rows < 1 || rows > sized)
    throw Error(Errc::invalid_argument, "SPLADE block of " + std::to_string(rows) + " rows: expected 1 to " +
                                            std::to_string(sized) + " (the workspace's)");
  splade_rows_ = rows;
  graphs_.clear();  // recorded with the old blocks
}

TensorView EncoderRunner::device(Buffer& b, DType t, std::initializer_list<int64_t> shape) const {
  return TensorView(b.data(), t, shape);
}

std::shared_ptr<Event> EncoderRunner::run(const PackedBatch& batch, const EncoderOutputs& out) {
  const HfConfig& c = enc_.config;
  const int64_t T = batch.tokens(), B = batch.sequences();
  const int64_t H = c.hidden_size, C = c.num_labels();
  if (T > max_tokens_ || B > max_sequences_) {
    throw Error(Errc::invalid_argument, "batch of " + std::to_string(B) + " sequences / " + std::to_string(T) +
                                            " tokens exceeds the workspace (" + std::to_string(max_sequences_) +
                                            " / " + std::to_string(max_tokens_) + ")");
  }
  if (B == 0) return backend_.record_event();
  check_packed_batch(batch, c);
  if (out.logits && !enc_.has_classifier())
    throw Error(Errc::invalid_argument, "logits asked for, but the model has no classification head");
  if (out.head_hidden && !enc_.has_head_dense())
    throw Error(Errc::invalid_argument, std::string(c.arch->head_on_pooler ? "pooler output" : "classification-head hidden state") +
                                            " asked for, but the model has no " +
                                            (c.arch->head_on_pooler ? "pooler" : "head"));
  if (out.head_hidden || out.logits) head_activation(*c.arch);  // one the ops compute

  Shape s;
  s.pooled = out.pooled != nullptr;
  s.pooling = out.pooling;
  s.normalize = out.normalize;
  const int64_t W = enc_.sentence_width();
  s.dims = out.dims > 0 ? out.dims : W;
  if (s.dims > W) throw Error(Errc::invalid_argument, "asked for " + std::to_string(s.dims) + " dimensions of " + std::to_string(W));
  if (!out.span_cu.empty()) {
    s.spans = static_cast<int64_t>(out.span_cu.size()) - 1;
    s.span_rows = out.span_cu.back();
    if (!s.pooled || s.spans > max_spans_ || s.span_rows > max_span_rows_ ||
        static_cast<int64_t>(out.span_rows.size()) != s.span_rows)
      throw Error(Errc::internal, "late chunking: " + std::to_string(s.spans) + " spans of " +
                                      std::to_string(s.span_rows) + " rows do not fit the runner's " +
                                      std::to_string(max_spans_) + " / " + std::to_string(max_span_rows_));
    for (int32_t r : out.span_rows)
      if (r < 0 || r >= T) throw Error(Errc::internal, "late chunking: a span row outside the batch");
  }
  s.head = out.head_hidden != nullptr || out.logits != nullptr;
  s.logits = out.logits != nullptr;
  // bge-m3's heads: each needs its file (model/m3_heads.h); both come from this forward.
  s.sparse = out.sparse_weights != nullptr;
  s.colbert = out.colbert != nullptr;
  if (s.sparse && !enc_.m3.has_sparse())
    throw Error(Errc::invalid_argument, "sparse weights asked for, but the model folder has no sparse_linear.pt");
  if (s.colbert && !enc_.m3.has_colbert() && enc_.colbert_dense.empty())
    throw Error(Errc::invalid_argument, "ColBERT vectors asked for, but the model folder has no colbert_linear.pt");
  // Per-sequence key counts (a ColBERT model's queries): global or windowed
  // attention of the BERT-like and pre-norm encoders; each query must reach a key.
  s.keys = !out.key_lens.empty();
  if (s.keys) {
    if (static_cast<int64_t>(out.key_lens.size()) != B)
      throw Error(Errc::internal, "key_lens: " + std::to_string(out.key_lens.size()) + " counts for " +
                                      std::to_string(B) + " sequences");
    if (c.arch->family == LayerFamily::decoder || !enc_.params.rel_bias.empty())
      throw Error(Errc::unsupported, "unattended query expansion (per-sequence attention keys) is not supported for " +
                                         std::string(c.arch->family == LayerFamily::decoder ? "decoder" : "relative-position (MPNet)") +
                                         " models");
    int window = 0;
    for (int w : c.attention_window) window = std::max(window, w);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = batch.cu_seqlens[static_cast<size_t>(b) + 1] - batch.cu_seqlens[static_cast<size_t>(b)];
      const int32_t k = out.key_lens[static_cast<size_t>(b)];
      if ((len == 0 ? k != 0 : (k < 1 || k > len)) || (window > 0 && len - 1 - window >= k))
        throw Error(Errc::invalid_argument, "sequence " + std::to_string(b) + " of " + std::to_string(len) +
                                                " tokens: " + std::to_string(k) + " attention keys" +
                                                (window > 0 ? " (each query within " + std::to_string(window) +
                                                                  " tokens of a key)" : std::string()));
    }
  }
  s.splade = out.splade != nullptr;
  if (s.splade && !enc_.splade.present())
    throw Error(Errc::invalid_argument, "SPLADE weights asked for, but the model is not a SPLADE sparse encoder");
  // Nothing asked (an inference-free SPLADE model's queries: their rows come
  // from the tokens alone, model/splade_head.h): no forward, no copies.
  if (!s.pooled && !s.head && !s.sparse && !s.colbert && !s.splade && !out.hidden) return backend_.record_event();
  // A graph runs at its bucket's shape: tokens rounded up, every sequence
  // slot, and attention's grid for the longest sequence the bucket can hold.
  // Sequence slots are bucketed by powers of two: attention launches a block
  // row per slot, and empty slots should be few.
  const int64_t bucket = (T + kGraphBucket - 1) / kGraphBucket * kGraphBucket;
  int64_t seq_bucket = 1;
  while (seq_bucket < B) seq_bucket *= 2;
  const int64_t graph_seqlen = std::min<int64_t>(bucket, c.max_position_embeddings);
  const bool graph =
      graphs_on_ && s.spans == 0 && T <= kGraphMaxTokens && bucket <= max_tokens_ && batch.max_seqlen <= graph_seqlen;
  s.tokens = graph ? bucket : T;
  s.sequences = graph ? std::min(seq_bucket, max_sequences_) : B;
  s.max_seqlen = graph ? static_cast<int>(graph_seqlen) : batch.max_seqlen;
  const int64_t Tr = s.tokens, Br = s.sequences;

  // Stage the inputs. The slot's previous copy must have run before the host
  // overwrites it; with two slots that is almost always already so (and when
  // not, the host throttles: flow control, not a host sync).
  Staging& slot = staging_[next_slot_];
  next_slot_ = (next_slot_ + 1) % staging_.size();
  if (slot.done && !backend_.event_done(*slot.done)) backend_.throttle(*slot.done);
  auto* host = static_cast<int32_t*>(slot.host->data());
  int32_t* h_ids = host;
  int32_t* h_types = h_ids + Tr;
  int32_t* h_pos = h_types + Tr;
  int32_t* h_cu = h_pos + Tr;
  int32_t* h_rows = h_cu + Br + 1;
  std::memcpy(h_ids, batch.ids.data(), static_cast<size_t>(T) * 4);
  std::memcpy(h_types, batch.type_ids.data(), static_cast<size_t>(T) * 4);
  std::memcpy(h_pos, batch.positions.data(), static_cast<size_t>(T) * 4);
  std::memcpy(h_cu, batch.cu_seqlens.data(), static_cast<size_t>(B + 1) * 4);
  // The first token of each sequence (an empty last sequence has none: row
  // T - 1 stands in, so the gather stays inside the batch).
  for (int64_t b = 0; b < B; ++b)
    h_rows[b] = static_cast<int32_t>(std::max<int64_t>(0, std::min<int64_t>(batch.cu_seqlens[static_cast<size_t>(b)], T - 1)));
  // A decoder's classifier reads the last token that is not the pad token
  // (transformers' *ForSequenceClassification rule; the first token when all
  // are pad), or the last token when the config names no pad token.
  if (c.arch->family == LayerFamily::decoder)
    for (int64_t b = 0; b < B; ++b) {
      const int64_t first = batch.cu_seqlens[static_cast<size_t>(b)], end = batch.cu_seqlens[static_cast<size_t>(b) + 1];
      int64_t row = end - 1;
      if (c.pad_token_id >= 0) {
        while (row >= first && batch.ids[static_cast<size_t>(row)] == c.pad_token_id) --row;
        if (row < first) row = first;
      }
      if (end > first) h_rows[b] = static_cast<int32_t>(row);
    }
  // Bucket padding: token 0 at position 0 for the rows past the batch (valid
  // table rows, in no sequence), empty sequences past the batch's.
  for (int64_t t = T; t < Tr; ++t) h_ids[t] = h_types[t] = h_pos[t] = 0;
  for (int64_t b = B; b < Br; ++b) {
    h_cu[b + 1] = static_cast<int32_t>(T);
    h_rows[b] = 0;
  }
  backend_.copy_to_device(ids_->data(), h_ids, static_cast<size_t>(Tr) * 4);
  backend_.copy_to_device(types_->data(), h_types, static_cast<size_t>(Tr) * 4);
  backend_.copy_to_device(positions_->data(), h_pos, static_cast<size_t>(Tr) * 4);
  backend_.copy_to_device(cu_->data(), h_cu, static_cast<size_t>(Br + 1) * 4);
  backend_.copy_to_device(cls_rows_->data(), h_rows, static_cast<size_t>(Br) * 4);
  if (s.spans > 0) {
    int32_t* h_span_rows = h_rows + Br;
    int32_t* h_span_cu = h_span_rows + s.span_rows;
    std::memcpy(h_span_rows, out.span_rows.data(), static_cast<size_t>(s.span_rows) * 4);
    std::memcpy(h_span_cu, out.span_cu.data(), static_cast<size_t>(s.spans + 1) * 4);
    backend_.copy_to_device(span_rows_->data(), h_span_rows, static_cast<size_t>(s.span_rows) * 4);
    backend_.copy_to_device(span_cu_->data(), h_span_cu, static_cast<size_t>(s.spans + 1) * 4);
  }

  if (s.keys) {  // after the spans' words; empty graph-padding sequences have no keys
    const size_t span_words = max_spans_ > 0 ? static_cast<size_t>(max_span_rows_ + max_spans_ + 1) : 0;
    int32_t* h_keys = host + 3 * max_tokens_ + 2 * std::max(max_sequences_, max_spans_) + 1 + static_cast<int64_t>(span_words);
    for (int64_t b = 0; b < Br; ++b) h_keys[b] = b < B ? out.key_lens[static_cast<size_t>(b)] : 0;
    backend_.copy_to_device(key_lens_->data(), h_keys, static_cast<size_t>(Br) * 4);
  }

  slot.done = backend_.record_event();

  if (!(graph && replay_graph(s))) {
    if (graph) {  // capture failed: run this and every later batch eagerly, unpadded
      s.tokens = T;
      s.sequences = B;
      s.max_seqlen = batch.max_seqlen;  // (the views take the batch's own B + 1 offsets of the staged ones)
    }
    enqueue_forward(s);
  }

  // Results: the batch's rows only.
  if (out.hidden) backend_.copy_to_host(out.hidden, h_->data(), static_cast<size_t>(T * H) * 4);
  if (out.pooled) {
    Buffer& src = s.dims < W ? *pooled_dims_ : pooled_result();
    const int64_t rows = s.spans > 0 ? s.spans : B;
    backend_.copy_to_host(out.pooled, src.data(), static_cast<size_t>(rows * s.dims) * 4);
  }
  if (out.head_hidden) backend_.copy_to_host(out.head_hidden, head_b_->data(), static_cast<size_t>(B * H) * 4);
  if (out.logits) backend_.copy_to_host(out.logits, logits_->data(), static_cast<size_t>(B * C) * 4);
  if (out.sparse_weights) backend_.copy_to_host(out.sparse_weights, m3_sparse_->data(), static_cast<size_t>(T) * 4);
  if (out.colbert && !enc_.colbert_dense.empty()) {  // a ColBERT model: the last Dense module's output
    const size_t n = enc_.colbert_dense.size();
    backend_.copy_to_host(out.colbert, ((n - 1) % 2 == 0 ? colbert_a_ : colbert_b_)->data(),
                          static_cast<size_t>(T * enc_.colbert_dense.back().w.dim(0)) * 4);
  } else if (out.colbert) {
    backend_.copy_to_host(out.colbert, m3_colbert_->data(), static_cast<size_t>(T * enc_.m3.colbert_dim()) * 4);
  }
  if (out.splade)
    backend_.copy_to_host(out.splade, splade_out_->data(), static_cast<size_t>(B * enc_.splade.vocab()) * 4);
  return backend_.record_event();
}

Buffer& EncoderRunner::pooled_result() const {
  if (enc_.dense.empty()) return *pooled_;
  return (enc_.dense.size() - 1) % 2 == 0 ? *dense_a_ : *dense_b_;
}

bool EncoderRunner::replay_graph(const Shape& s) {
  auto it = graphs_.find(s.key());
  if (it == graphs_.end()) {
    std::unique_ptr<Graph> g;
    try {
      backend_.begin_capture();
      try {
        enqueue_forward(s);
      } catch (...) {
        backend_.end_capture();  // leaves the stream usable; the recording is dropped
        throw;
      }
      g = backend_.end_capture();
    } catch (const Error&) {
      graphs_on_ = false;
      return false;
    }
    it = graphs_.emplace(s.key(), std::move(g)).first;
  }
  backend_.replay(*it->second);
  return true;
}

void EncoderRunner::enqueue_forward(const Shape& s) {
  const HfConfig& c = enc_.config;
  const EncoderParams& p = enc_.params;
  const int64_t T = s.tokens, B = s.sequences;
  const int64_t H = c.hidden_size, C = c.num_labels();
  const Ops& ops = backend_.ops();
  const TensorView ids = device(*ids_, DType::i32, {T});
  const TensorView types = device(*types_, DType::i32, {T});
  const TensorView positions = device(*positions_, DType::i32, {T});
  const TensorView cu = device(*cu_, DType::i32, {B + 1});
  const TensorView rows = device(*cls_rows_, DType::i32, {B});
  const TensorView h = device(*h_, DType::f32, {T, H});
  // h's compute-dtype copy (empty in f32): the encoders' GEMM input.
  const TensorView h_low = h_low_ ? device(*h_low_, enc_.dtype, {T, H}) : TensorView{};
  SequenceInputs in;
  in.ids = ids;
  in.positions = positions;
  in.types = p.token_type_embeddings.empty() ? TensorView{} : types;  // no token types (DistilBERT)
  in.cu = cu;
  in.max_seqlen = s.max_seqlen;
  in.heads = static_cast<int>(c.num_attention_heads);
  in.eps = static_cast<float>(c.layer_norm_eps);
  if (s.keys) in.key_lens = device(*key_lens_, DType::i32, {B});
  if (!p.rel_bias.empty()) {
    const int64_t R = 2 * static_cast<int64_t>(s.max_seqlen) - 1;
    in.rel = device(*rel_, DType::f32, {R, c.num_attention_heads});
    const TensorView buckets(static_cast<int32_t*>(rel_buckets_->data()) + (c.max_position_embeddings - s.max_seqlen),
                             DType::i32, {R});
    relative_bias_forward(ops, in.rel, p.rel_bias, buckets);
  }
  // The layers: the family's sequence on its unit's views (one dispatch; its head below is the other).
  std::visit(Overloaded{
                 [&](const PostLnBuffers& b) {  // model/post_ln_family.h
                   const TensorView e = p.emb_proj_w.empty() ? h : device(*emb_, DType::f32, {T, c.embedding_size});
                   post_ln_encoder_forward(ops, p, c, in, e, b.views(h, h_low, T));
                 },
                 [&](const PrenormBuffers& b) {  // ModernBERT: model/prenorm_family.h
                   in.positions = b.zero_positions(T);
                   prenorm_encoder_forward(ops, p, c, in, b.views(h, h_low, T), nullptr);
                 },
                 [&](const DecoderBuffers& b) {  // Qwen2, Qwen3: model/decoder_family.h
                   DecoderInputs din;
                   din.ids = ids;
                   din.cu = cu;
                   din.inv_freq = b.inv_freq();
                   din.max_seqlen = s.max_seqlen;
                   din.heads = static_cast<int>(c.num_attention_heads);
                   din.kv_heads = static_cast<int>(c.num_key_value_heads);
                   din.head_dim = static_cast<int>(c.head_dim());
                   din.eps = static_cast<float>(c.layer_norm_eps);
                   din.causal = c.causal;
                   decoder_forward(ops, p, din, b.views(h, T));
                 },
             },
             layers_);

  if (s.pooled) {
    // Pooling, the Dense modules, Normalize, then the first dims columns
    // (sentence-transformers' order).
    // Late chunking pools spans: their rows gathered, then pooled per span.
    const int64_t P = s.spans > 0 ? s.spans : B;
    TensorView pooled = device(*pooled_, DType::f32, {P, H});
    if (s.spans > 0) {
      const TensorView span_h = device(*span_h_, DType::f32, {s.span_rows, H});
      ops.gather_rows(span_h, h, device(*span_rows_, DType::i32, {s.span_rows}));
      ops.pool(pooled, span_h, device(*span_cu_, DType::i32, {s.spans + 1}), s.pooling);
    } else {
      ops.pool(pooled, h, cu, s.pooling);
    }
    for (size_t i = 0; i < enc_.dense.size(); ++i) {
      const DenseLayerParams& d = enc_.dense[i];
      const TensorView next = device(i % 2 == 0 ? *dense_a_ : *dense_b_, DType::f32, {P, d.w.dim(0)});
      ops.linear(next, pooled, d.w, d.b, d.act, Accumulate::no);
      pooled = next;
    }
    if (s.normalize) ops.l2_normalize(pooled);
    if (s.dims < pooled.dim(1)) ops.slice_columns(device(*pooled_dims_, DType::f32, {P, s.dims}), pooled);
  }
  if (s.head) {
    // act(dense(h[first token])), then the output layer: BERT's pooler +
    // classifier, RoBERTa's dense + tanh + out_proj, ELECTRA's with GELU.
    // All in f32.
    const TensorView first = device(*head_a_, DType::f32, {B, H});
    const TensorView hidden = device(*head_b_, DType::f32, {B, H});
    TensorView head_in = hidden;  // the output layer's input
    std::visit(Overloaded{
                   [&](const PostLnBuffers&) {  // act(dense(h[first token]))
                     post_ln_head_forward(ops, p, c, h, rows, first, hidden);
                   },
                   [&](const PrenormBuffers& b) {  // ModernBERT: pooled (cls or mean), dense, GELU, LayerNorm
                     prenorm_head_forward(ops, p, c, h, cu, first, hidden, b.zero_rows(B));
                   },
                   [&](const DecoderBuffers&) {  // score(h[last non-pad token]): no hidden layer
                     ops.gather_rows(first, h, rows);
                     head_in = first;
                   },
               },
               layers_);
    if (s.logits)
      ops.linear(device(*logits_, DType::f32, {B, C}), head_in, p.head_out_w, p.head_out_b, Activation::none, Accumulate::no);
  }
  // bge-m3's heads on every token's last hidden state (graph-padded rows
  // included: computed, never copied out).
  if (s.sparse || s.colbert) {
    const TensorView sparse = s.sparse ? device(*m3_sparse_, DType::f32, {T, 1}) : TensorView{};
    const TensorView colbert =
        s.colbert && enc_.m3.has_colbert() ? device(*m3_colbert_, DType::f32, {T, enc_.m3.colbert_dim()}) : TensorView{};
    m3_heads_forward(ops, enc_.m3, h, sparse, colbert);
  }
  // A ColBERT model (PyLate): its Dense modules on every token's last hidden
  // state, then each vector L2-normalized (graph-padded rows too: never copied out).
  if (s.colbert && !enc_.colbert_dense.empty()) {
    TensorView x = h;
    for (size_t i = 0; i < enc_.colbert_dense.size(); ++i) {
      const DenseLayerParams& d = enc_.colbert_dense[i];
      const TensorView next = device(i % 2 == 0 ? *colbert_a_ : *colbert_b_, DType::f32, {T, d.w.dim(0)});
      ops.linear(next, x, d.w, d.b, d.act, Accumulate::no);
      x = next;
    }
    ops.l2_normalize(x);
  }
  // SPLADE's MLM head and pooling (graph-padded rows are in no sequence: not pooled).
  if (s.splade) {
    const int64_t V = enc_.splade.vocab();
    SpladeViews sv;
    sv.transformed = device(*splade_t_, DType::f32, {T, H});
    sv.block = device(*splade_block_, DType::f32, {splade_rows_, V});
    splade_head_forward(ops, enc_.splade, h, cu, sv, device(*splade_out_, DType::f32, {B, V}));
  }
}

}  // namespace stoke
