// The request batcher: texts from many callers (HTTP requests in `stoke
// serve`, concurrent `Model.encode` calls in the Python package) share
// token-budget batches, so a device fed one or a few texts at a time still
// runs full batches.
//
//   submit() ──> tokenizer pool ──> pending groups ──> executor ──> collector
//   (any thread;  (worker threads:    (FIFO of whole    (own thread:   (own thread: waits on each
//    returns at    a request's texts   tokenized         cuts a batch   batch's event — the one host
//    once)         are tokenized       requests)         and enqueues   sync per batch — scatters rows
//                  together)                             it)            to their requests, completes them)
//
// Batches form by generations: when the executor has nothing left to cut, it
// takes every request queued (whole requests, FIFO, up to `generation_texts`
// texts) and cuts them longest-first by token budget, exactly as
// cut_batches() cuts an embed window. So a single caller's request forms the
// batches `stoke embed` forms for the same texts (bit-identical rows), and no
// request waits behind more than one generation (no starvation of short
// texts). While the device runs batch k, batch k+1 is packed and enqueued
// into the next free output slot. A text's row never depends on which other
// requests shared its batch beyond f32 rounding of the GEMMs (≤ 1e-6).
//
// Requests of different products (pooled / token vectors / logits) never
// share a generation: a generation takes the product of its first request.
// Per-request settings that do not change the model's computation
// (truncating dimensions, normalizing) are the caller's, on the rows it gets:
// pooled rows come back at the model's full sentence width, normalized only
// when the model's own Normalize module says so.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/encoder.h"
#include "model/text_outputs.h"
#include "pipeline/row_product.h"
#include "text/tokenizer.h"

namespace stoke {
class Trace;
}

namespace stoke {

// One input: a text (and its pair, for cross-encoders), or token ids already
// made by this model's tokenizer (used as they are: no special tokens added).
struct BatchItem {
  std::string text;
  std::optional<std::string> pair;
  std::optional<std::vector<int32_t>> ids;
};

struct BatchRequestOptions {
  RowProduct product = RowProduct::pooled;
  // false: a text longer than the max length fails the request (Errc::invalid_argument,
  // naming the input's index and its token count) instead of being cut.
  bool truncate = true;
  bool truncate_left = false;  // cut keeps the last tokens (TEI's truncation_direction Left)
  std::string prompt;  // put before every text (sentence-transformers prompts)
  // Sparse / multi-vector outputs beside (or, for a model with no dense
  // vector, instead of) the pooled rows: BatchRequest::extras, per text
  // (model/text_outputs.h). pooled product only. Requests with other extras
  // settings never share a generation.
  TextOutputSettings extras;
};

struct RequestBatcherOptions {
  EncodeOptions encode;              // max length (truncation is per request)
  Pooling pooling = Pooling::mean;
  bool normalize = false;            // the model's own Normalize module
  int64_t batch_tokens = 16384;      // token budget per batch
  int64_t max_batch_size = 256;      // sequences per batch at most
  uint64_t generation_texts = 65536; // texts cut together at most (embed's --sort-window)
  int workers = 1;                   // tokenizer threads
  // How long the executor may wait for more requests when the device is idle
  // and the queued texts fill less than half the token budget (0: run at once).
  double max_wait_seconds = 0;
  // Called first on every thread the batcher starts ("batcher-tokenizer-N",
  // "batcher-executor", "batcher-collector").
  std::function<void(const std::string&)> on_thread_start;
  // Spans of each stage (nullptr: none): "tokenize" on the tokenizer threads;
  // per batch on the executor "queue wait" (from when its oldest text was
  // ready, or the previous batch was cut, to its cut), "wait slot" and "copy"
  // (packing and handing the batch to the device); on the collector "compute"
  // (waiting for the batch's result: the host sync) and "scatter". Must
  // outlive the batcher.
  Trace* trace = nullptr;
};

struct RequestBatcherState;

// One submitted request: its inputs, then (once done) its rows.
class BatchRequest {
 public:
  enum class State { queued, done, failed, cancelled };

  // Blocks until the request is done, failed or cancelled.
  State wait();
  // As wait(), but returns the state so far after `timeout` (a Python caller
  // polls for KeyboardInterrupt between waits).
  State wait_for(std::chrono::milliseconds timeout);
  // Drops the request's texts that have not yet been batched; completes it
  // as cancelled (at once when nothing of it is on the device, else when its
  // batches finish). Idempotent; a done request stays done.
  void cancel();
  State state() const;
  // The error of a failed request (rethrow it with std::rethrow_exception).
  std::exception_ptr error() const;

  // Results, valid once state() == done. `values` is owned by the request and
  // handed out as is (the Python package gives numpy a view of it, no copy).
  // pooled / logits: texts × width row-major. tokens: row_offsets[i] ..
  // row_offsets[i + 1] are text i's rows of width H.
  std::vector<float> values;
  int64_t width = 0;
  std::vector<int64_t> row_offsets;   // tokens product only (texts + 1 entries)
  std::vector<TextExtras> extras;     // per text, when BatchRequestOptions::extras asks (else empty)
  std::vector<int32_t> token_counts;  // tokens of each text after truncation (usage)
  std::vector<uint8_t> truncated;     // 1 where a text was cut to the max length
  uint64_t total_tokens = 0;
  // Where the request's time went, in seconds (for metrics).
  double tokenize_seconds = 0;  // submit → tokenized
  double queue_seconds = 0;     // tokenized → its first batch enqueued
  double inference_seconds = 0; // first batch enqueued → last row collected

 private:
  friend class RequestBatcher;
  friend struct RequestBatcherState;
  friend void request_finished(RequestBatcherState& owner, size_t uncollected_texts, bool cancelled);
  BatchRequest() = default;
  // Completes the request once (later calls do nothing); runs on_done_
  // outside the lock.
  void finish(State state, std::exception_ptr error = nullptr);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::queued;
  std::exception_ptr error_;
  std::function<void(BatchRequest&)> on_done_;
  // The batcher's bookkeeping, under mu_ once the request is queued.
  std::vector<BatchItem> items_;
  BatchRequestOptions options_;
  std::vector<Encoding> encodings_;
  size_t chunks_left_ = 0;  // tokenization chunks still running
  size_t unbatched_ = 0;    // texts not yet in a batch on the device
  size_t in_flight_ = 0;    // texts in batches not yet collected
  size_t texts_ = 0, collected_ = 0;  // texts in the request; rows written so far
  bool cancelled_ = false, started_ = false;
  RequestBatcherState* owner_ = nullptr;  // told when the request finishes (set once it is counted)
  std::chrono::steady_clock::time_point submitted_, tokenized_, started_at_;
};

// Counters for metrics and summaries (monotonic since the batcher started).
struct RequestBatcherStats {
  uint64_t requests = 0, texts = 0, tokens = 0, batches = 0;
  uint64_t cancelled_texts = 0;  // dropped before reaching the device
  uint64_t queued_texts = 0;     // waiting now (tokenized or not)
  uint64_t host_syncs = 0;       // the backend's, since the batcher started
  double device_busy_seconds = -1;
  double seconds = 0;            // since the batcher started
  int64_t batch_tokens = 0;      // the budget in use (halved on out-of-memory)
};

// A text longer than the max length in a request that does not truncate:
// the message says the input and its length in no API's terms; each API
// adds how its clients make it pass (serve/routes.cc).
class InputTooLongError : public Error {
 public:
  explicit InputTooLongError(const std::string& message) : Error(Errc::invalid_argument, message) {}
};

class RequestBatcher {
 public:
  // Allocates the device workspace for the token budget (halving it on
  // out-of-memory, as the embed pipeline does) and starts the threads.
  // Throws Error with one clear line on a bad option.
  RequestBatcher(const LoadedEncoder& encoder, Backend& backend, const Tokenizer& tokenizer,
                 const RequestBatcherOptions& options);
  // stop(), then joins the threads.
  ~RequestBatcher();
  RequestBatcher(const RequestBatcher&) = delete;
  RequestBatcher& operator=(const RequestBatcher&) = delete;

  // Queues a request; returns at once. `on_done` (optional) runs once when it
  // completes (done, failed or cancelled), on a batcher thread: it must not
  // block (an HTTP server posts to its I/O context). An empty request
  // completes at once. Invalid input (an id outside the vocabulary, no ids, a
  // text over the max length without truncation, logits from a model without
  // a classification head) fails the request with Error(invalid_argument /
  // unsupported) naming the input's index. After stop(), requests fail with
  // Error(refused) "the server is stopping: no new requests are taken".
  std::shared_ptr<BatchRequest> submit(std::vector<BatchItem> items, const BatchRequestOptions& options,
                                       std::function<void(BatchRequest&)> on_done = {});

  // Stops taking requests; queued and in-flight ones are finished first when
  // `drain` is true, else cancelled. Returns when no batch is on the device.
  void stop(bool drain = true);

  // Runs fn(backend) on the executor thread between batches — the thread
  // that drives the backend's one stream, so work a caller enqueues (MaxSim
  // scores for a rerank) never interleaves with a batch's. on_done(error)
  // follows on the same thread (error null when fn returned). After stop()
  // or a device error the task is refused: on_done gets the error at once.
  void run_on_device(std::function<void(Backend&)> fn, std::function<void(std::exception_ptr)> on_done);

  RequestBatcherStats stats() const;
  // Called on the collector thread after each batch (sequences, tokens,
  // device seconds when the backend can tell), for histograms.
  void set_batch_observer(std::function<void(int64_t sequences, int64_t tokens)> observer);

  int64_t max_length() const;
  int64_t pooled_width() const;   // the model's sentence width
  int64_t hidden_size() const;
  int64_t num_labels() const;     // 0 without a classification head

 private:
  std::unique_ptr<RequestBatcherState> state_;
};

}  // namespace stoke
