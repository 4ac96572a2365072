// The encoder forward on packed tokens, enqueued on a backend: embeddings,
// L post-LN transformer layers (GEMMs and attention in the compute dtype, the
// residual stream and LayerNorm in f32), then whatever the caller asks for — pooled
// sentence vectors, the pooler / classification-head hidden state, logits, or
// the last hidden state. One call enqueues the whole batch and returns an
// event; the host waits on it only when it needs the results.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/encoder_params.h"
#include "model/packed_batch.h"

namespace stoke {

// Host destinations (f32) for one batch; nullptr = not wanted. B = sequences, T = tokens.
struct EncoderOutputs {
  float* pooled = nullptr;  // (B, dims): pooling, then L2 normalize if asked, then the first `dims` columns
  PoolingMode pooling = PoolingMode::mean;
  bool normalize = false;
  int64_t dims = 0;         // 0: hidden size
  float* head_hidden = nullptr;  // (B, H): BERT pooler output / XLM-R classification-head dense output
  float* logits = nullptr;       // (B, C)
  float* hidden = nullptr;       // (T, H): last hidden state
};

class EncoderRunner {
 public:
  // Workspace is sized once for `max_tokens` tokens and `max_sequences`
  // sequences per batch, so no buffer is ever freed under running work.
  // `staging_slots` batches can be enqueued before the first slot is reused;
  // a caller that keeps at most that many batches unread never waits in run().
  EncoderRunner(const LoadedEncoder& encoder, Backend& backend, int64_t max_tokens, int64_t max_sequences,
                size_t staging_slots = 2);
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

 private:
  struct Staging {  // host copies of one batch's inputs, alive until its copy ran
    std::unique_ptr<Buffer> host;
    std::shared_ptr<Event> done;
  };
  TensorView device(Buffer& b, DType t, std::initializer_list<int64_t> shape) const;

  const LoadedEncoder& enc_;
  Backend& backend_;
  int64_t max_tokens_, max_sequences_;
  // Device workspace.
  std::unique_ptr<Buffer> ids_, types_, positions_, cu_, cls_rows_;
  std::unique_ptr<Buffer> h_, h_low_, qkv_, ctx_, tmp_, ffn_, head_a_, head_b_, pooled_, pooled_dims_, logits_;
  std::vector<Staging> staging_;
  size_t next_slot_ = 0;
};

}  // namespace stoke
