// Runs the encoder over a window of texts the way every job wants it: the
// texts are tokenized on the thread pool, sorted by length, cut into batches
// by a token budget (long texts make small batches, short texts big ones, no
// padding anywhere), enqueued on the backend with two batches in flight, and
// each text's output row is handed back in input order. (The pipeline issue
// turns this into overlapped stages; the contract stays.)
#pragma once

#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/thread_pool.h"
#include "model/encoder.h"
#include "text/tokenizer.h"

namespace stoke {

enum class EncoderProduct { pooled, logits };

struct BatchedEncoderOptions {
  int64_t batch_tokens = 16384;  // token budget per batch
  int64_t max_batch_size = 256;  // sequences per batch at most
  EncodeOptions encode;          // max length, truncation
  EncoderProduct product = EncoderProduct::pooled;
  PoolingMode pooling = PoolingMode::mean;
  bool normalize = false;
  int64_t dims = 0;              // pooled columns kept (0 = hidden size)
};

struct BatchedEncoderStats {
  uint64_t texts = 0, tokens = 0, batches = 0;
  EncodeStats encode;
  double tokenize_seconds = 0, compute_wait_seconds = 0;
};

class BatchedEncoder {
 public:
  BatchedEncoder(const LoadedEncoder& encoder, Backend& backend, const Tokenizer& tokenizer,
                 BatchedEncoderOptions options, ThreadPool& pool);
  // Width of one output row: pooled dims, or the number of labels.
  int64_t width() const { return width_; }
  // rows: (inputs.size(), width()) f32, filled in input order.
  void run(std::span<const TextInput> inputs, float* rows);
  const BatchedEncoderStats& stats() const { return stats_; }

 private:
  struct InFlight {
    std::shared_ptr<Event> done;
    std::vector<float> out;        // (B, width)
    std::vector<size_t> indices;   // input index of each row
  };
  void finish(InFlight& f, float* rows);

  const LoadedEncoder& enc_;
  Backend& backend_;
  const Tokenizer& tok_;
  BatchedEncoderOptions opt_;
  ThreadPool& pool_;
  EncoderRunner runner_;
  int64_t width_;
  BatchedEncoderStats stats_;
};

}  // namespace stoke
