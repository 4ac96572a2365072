// The encoder forward on packed tokens, enqueued on a backend: embeddings,
// L post-LN transformer layers (GEMMs and attention in the compute dtype, the
// residual stream and LayerNorm in f32), then whatever the caller asks for — pooled
// sentence vectors, the pooler / classification-head hidden state, logits, or
// the last hidden state. One call enqueues the whole batch and returns an
// event; the host waits on it only when it needs the results.
#pragma once

#include <array>
#include <map>
#include <tuple>
#include <memory>
#include <span>
#include <variant>
#include <vector>

#include "backend/backend.h"
#include "model/decoder_family.h"
#include "model/encoder_params.h"
#include "model/packed_batch.h"
#include "model/post_ln_family.h"
#include "model/prenorm_family.h"

namespace stoke {

// Host destinations (f32) for one batch; nullptr = not wanted. B = sequences, T = tokens.
struct EncoderOutputs {
  float* pooled = nullptr;  // (B, dims): pooling, the Dense modules, L2 normalize if asked, the first `dims` columns
  Pooling pooling = Pooling::mean;
  bool normalize = false;
  int64_t dims = 0;         // 0: the sentence width (hidden size, or the last Dense module's out_features)
  float* head_hidden = nullptr;  // (B, H): the head's hidden layer (BERT's pooler output, RoBERTa's dense + tanh, ...)
  float* logits = nullptr;       // (B, C)
  float* hidden = nullptr;       // (T, H): last hidden state
  // bge-m3's heads (model/m3_heads.h), from the same forward, per token of
  // the batch (row 0 of each sequence included: model/m3_outputs.h turns
  // these into each text's lexical weights and ColBERT vectors).
  float* sparse_weights = nullptr;  // (T): relu(sparse_linear(h[t]))
  float* colbert = nullptr;         // (T, D): colbert_linear(h[t]), L2-normalized; D = LoadedEncoder::m3.colbert_dim()
                                    // (a PyLate ColBERT model: its Dense modules on h[t], normalized;
                                    //  D = the last one's out_features: model/colbert_model.h)
  // (B): only the first key_lens[b] tokens of sequence b are attention keys
  // in every layer (a ColBERT model's queries with unattended expansion
  // tokens: model/text_outputs.h text_key_lens); empty: every token.
  std::span<const int32_t> key_lens;
  // A SPLADE model's pooled lexical weights (model/splade_head.h), one row per
  // sequence: log1p(relu(MLM logits)) max- (or sum-) pooled over its tokens.
  float* splade = nullptr;          // (B, V): V = LoadedEncoder::splade.vocab()
  // Late chunking: `pooled` pools spans of token rows instead of whole
  // sequences. Span k is the batch's token rows span_rows[span_cu[k] ..
  // span_cu[k + 1]) (a row may be in several spans: chunks overlap); pooled
  // then holds (span_cu.size() - 1, dims), each span through the Dense
  // modules and normalization as a sequence would go. Needs a runner built
  // with room for them (max_spans, max_span_rows); batches with spans run
  // eagerly, never as graphs.
  std::span<const int32_t> span_rows, span_cu;
};

class EncoderRunner {
 public:
  // Workspace is sized once for `max_tokens` tokens and `max_sequences`
  // sequences per batch, so no buffer is ever freed under running work.
  // `staging_slots` batches can be enqueued before the first slot is reused;
  // a caller that keeps at most that many batches unread never waits in run().
  // max_spans / max_span_rows: room for late chunking's spans
  // (EncoderOutputs::span_cu) in one batch; 0: none.
  EncoderRunner(const LoadedEncoder& encoder, Backend& backend, int64_t max_tokens, int64_t max_sequences,
                size_t staging_slots = 2, int64_t max_spans = 0, int64_t max_span_rows = 0);
  // Drains the backend: queued work may still use the workspace.
  ~EncoderRunner();
  EncoderRunner(const EncoderRunner&) = delete;
  EncoderRunner& operator=(const EncoderRunner&) = delete;

  // Enqueues the forward of `batch` and the copies into `out`; returns the
  // event after which `out` holds the results. `batch` is copied into a
  // staging slot; reusing a slot first waits (rarely) for its last copy.
  std::shared_ptr<Event> run(const PackedBatch& batch, const EncoderOutputs& out);

  int64_t max_tokens() const { return max_tokens_; }
  int64_t max_sequences() const { return max_sequences_; }

  // Graphs (a backend that can capture them: CUDA). A batch of at most
  // kGraphMaxTokens tokens runs as the replay of a graph captured once for
  // its bucket: the token count rounded up to a multiple of kGraphBucket
  // (rows past the batch's tokens belong to no sequence: they are computed
  // by the row-wise kernels and read by nothing) and the sequence count
  // rounded up to a power of two (empty ones past the batch's). Small batches are where launch overhead
  // shows; larger ones run eagerly, with no padding at all. On by default
  // where the backend can capture.
  static constexpr int64_t kGraphMaxTokens = 4096;
  static constexpr int64_t kGraphBucket = 256;
  void set_graphs(bool on) { graphs_on_ = on && backend_.can_capture(); }
  size_t graphs_captured() const { return graphs_.size(); }

  // SPLADE: token rows per decoder block (model/splade_head.h), at most the
  // height the workspace was sized for; smaller blocks only cost launches
  // (the tests cut batches into many).
  void set_splade_block_rows(int64_t rows);
  int64_t splade_block_rows() const { return splade_rows_; }

 private:
  struct Staging {  // host copies of one batch's inputs, alive until its copy ran
    std::unique_ptr<Buffer> host;
    std::shared_ptr<Event> done;
  };
  TensorView device(Buffer& b, DType t, std::initializer_list<int64_t> shape) const;
  // What a forward computes beyond the hidden state: the graph key, with the
  // shape it runs at.
  struct Shape {
    int64_t tokens = 0, sequences = 0;
    int max_seqlen = 0;
    bool pooled = false, normalize = false, head = false, logits = false;
    Pooling pooling = Pooling::mean;
    int64_t dims = 0;
    int64_t spans = 0, span_rows = 0;  // late chunking (never in a graph): pooled rows are spans
    bool sparse = false, colbert = false;  // bge-m3's per-token heads
    bool splade = false;                   // a SPLADE model's pooled MLM weights
    bool keys = false;                     // per-sequence key counts (EncoderOutputs::key_lens)
    using Key = std::tuple<int64_t, int64_t, int, bool, bool, bool, bool, int, int64_t, bool, bool, bool, bool>;
    Key key() const {
      return {tokens, sequences, max_seqlen, pooled, normalize, head, logits, static_cast<int>(pooling), dims, sparse, colbert,
              splade, keys};
    }
  };
  // Enqueues the forward on the device inputs already staged, into the
  // workspace (no copies: graphs record exactly this).
  void enqueue_forward(const Shape& s);
  // Runs `s` as a graph replay (capturing it first when new); false when it
  // cannot be captured (graphs are then off for this runner).
  bool replay_graph(const Shape& s);
  // The buffer holding the full-width sentence vectors after the Dense modules.
  Buffer& pooled_result() const;

  const LoadedEncoder& enc_;
  Backend& backend_;
  int64_t max_tokens_, max_sequences_;
  int64_t max_spans_ = 0, max_span_rows_ = 0;
  // Late chunking: the spans' token rows gathered (R, H) f32, their row
  // indices (R) and offsets (S + 1).
  std::unique_ptr<Buffer> span_h_, span_rows_, span_cu_;
  // Device workspace.
  std::unique_ptr<Buffer> ids_, types_, positions_, cu_, cls_rows_;
  std::unique_ptr<Buffer> m3_sparse_, m3_colbert_;  // bge-m3's heads: (T) f32, (T, D) f32
  // A ColBERT model: its Dense modules' (T, out) outputs, ping-pong (the
  // last one normalized in place and copied out), and the key counts (B) i32.
  std::unique_ptr<Buffer> colbert_a_, colbert_b_, key_lens_;
  // SPLADE (model/splade_head.h): (T, H) f32 transformed states, (rows, V) f32
  // one logits block, (B, V) f32 the pooled weights.
  std::unique_ptr<Buffer> splade_t_, splade_block_, splade_out_;
  int64_t splade_rows_ = 0;  // the logits block's height
  std::unique_ptr<Buffer> rel_buckets_, rel_;  // MPNet: (2P - 1) buckets, (2P - 1, heads) bias
  std::vector<int32_t> rel_bucket_host_;        // the buckets' host copy (read by the copy, on the stream)
  std::unique_ptr<Buffer> dense_a_, dense_b_;  // (B, out) the Dense modules' outputs
  std::unique_ptr<Buffer> emb_, h_, h_low_, head_a_, head_b_, pooled_, pooled_dims_, logits_;
  // The layer family's workspace, its unit's (the one alternative of
  // c.arch->family, chosen once by the constructor).
  std::variant<PostLnBuffers, PrenormBuffers, DecoderBuffers> layers_;
  std::vector<Staging> staging_;
  size_t next_slot_ = 0;
  bool graphs_on_ = false;
  std::map<Shape::Key, std::unique_ptr<Graph>> graphs_;
};

}  // namespace stoke
