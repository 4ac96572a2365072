// The encode pipeline (DESIGN "Data flow (embed)"): texts in, one output row
// per record out, in input order, with the device never waiting on the host.
//
//   reader ──> tokenizer pool ──> bucketer + stager + executor ──> writer
//   (thread)   (thread + N-1       (the calling thread: sort a      (thread: waits on each
//               pool workers)       window by length, cut batches    batch's event — the one
//                                   by token budget, enqueue)        host sync per batch —
//                                                                    restores order, hands rows on)
//
// Every arrow is a bounded queue. Windows are fixed ranges of record numbers
// ([kW, (k+1)W)), so a resumed run forms exactly the same batches as an
// uninterrupted one. Output host buffers are recycled slots: the executor
// enqueues a batch only into a free slot, the writer frees it after reading the
// results, so no more than `kSlots` batches are ever unread and the encoder's
// staging buffers are never reused under a pending copy.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "backend/backend.h"
#include "core/trace.h"
#include "model/encoder.h"
#include "model/text_outputs.h"
#include "pipeline/batch_journal.h"
#include "pipeline/record_reader.h"
#include "pipeline/row_product.h"
#include "pipeline/shard_writer.h"
#include "pipeline/text_chunks.h"
#include "text/tokenizer.h"

namespace stoke {

struct EncodePipelineOptions {
  RecordReaderOptions input;
  std::string prompt;             // put before every text
  bool pairs = false;             // encode the pair field too (cross-encoders)
  EncodeOptions encode;           // max length, truncation
  int64_t batch_tokens = 16384;   // token budget per batch
  int64_t max_batch_size = 256;   // sequences per batch at most
  uint64_t sort_window = 65536;   // records sorted together
  int workers = 1;                // tokenizer threads
  uint64_t task_index = 0, task_count = 1;  // record r belongs to task r mod count
  bool skip_bad_records = false;  // --on-error skip (else a bad record stops the run)
  uint64_t resume_record = 0;     // records before this one were committed by an earlier run
  bool serial = false;            // one stage at a time on the calling thread (the comparison loop)
  RowProduct product = RowProduct::pooled;  // pooled or logits (tokens is refused)
  ChunkOptions chunks;            // pooled rows only
  // Sparse and multi-vector outputs from the same forward
  // (model/text_outputs.h: bge-m3's heads, SPLADE, ColBERT): each row's
  // lexical weights and vectors, handed to the sink beside the pooled row.
  // No batch journal then (its rows are fixed-width): a stop keeps what
  // shards committed.
  TextOutputSettings extras;
  Pooling pooling = Pooling::mean;
  bool normalize = false;
  int64_t dims = 0;               // pooled columns kept (0 = hidden size)
  Trace* trace = nullptr;
  // Profiling (stoke doctor / tune): stop reading new records once this many
  // seconds have passed (0: read everything); the run then covers a prefix
  // of the input (PipelineStats::stopped_early).
  double stop_after_seconds = 0;
  // Read only the first this many records of the input (0: all of them):
  // the int8 quality sample (jobs/int8_quality.h).
  uint64_t max_records = 0;
  // Set from another thread to stop early, as the deadline above does: no
  // record is read and no batch enqueued once it is seen, the window in hand
  // is dropped unwritten, and the run returns with PipelineStats::cancelled.
  // The sink has then seen every row of the windows before, in order.
  const std::atomic<bool>* cancel = nullptr;
  // Where each finished batch's rows are kept until a shard holds them, and
  // where an earlier run's are found (pipeline/batch_journal.h): a batch an
  // earlier run finished is not computed again, nor one whose every record
  // an earlier run committed. nullptr: rows are kept only in shards.
  BatchJournal* journal = nullptr;
  // Debugging: a host sync after every batch is enqueued, the classic
  // mistake doctor must recognise (--debug-sync-each-batch).
  bool debug_sync_each_batch = false;
  // Called first on every thread the pipeline runs ("reader", "tokenizer-0",
  // "tokenizer-1", ..., "batcher", "writer"): doctor's CPU sampler hooks in.
  std::function<void(const std::string&)> on_thread_start;
};

// Where rows go, in input order. Called from one thread (the writer).
class RowSink {
 public:
  virtual ~RowSink() = default;
  // An embedded record and its output row (`width` floats).
  virtual void row(const InputRecord& record, const Encoding& encoding, const float* values) = 0;
  // A bad record skipped under --on-error skip.
  virtual void skipped(const InputRecord& record) = 0;
  // A row with its sparse / ColBERT outputs (EncodePipelineOptions::sparse,
  // ::colbert), in place of row().
  virtual void row_with_extras(const InputRecord& record, const Encoding& encoding, const float* values,
                               const RowExtras& extras);
  // A chunked run's row (EncodePipelineOptions::chunks), in place of row():
  // a record's chunks come one after another, in order.
  virtual void chunk_row(const InputRecord& record, const ChunkRow& chunk, const float* values);
};

// Busy and blocked time of one stage, in seconds.
struct StageTime {
  double busy = 0;
  double wait_input = 0;   // starved by the stage before
  double wait_output = 0;  // held back by the stage after
};

struct PipelineProgress {
  uint64_t records = 0, texts = 0, tokens = 0, bytes_read = 0, total_bytes = 0;
};

struct PipelineStats {
  uint64_t records = 0;      // records seen in the input (all tasks)
  uint64_t texts = 0;        // rows handed to the sink
  uint64_t chunked_records = 0;  // chunked runs: records whose rows were handed to the sink
  uint64_t tokens = 0, truncated = 0, replaced_utf8 = 0;
  uint64_t skipped = 0;      // bad records handed to the sink
  uint64_t other_tasks = 0;  // records belonging to other tasks
  uint64_t resumed = 0;      // records dropped because an earlier run committed them
  uint64_t batches = 0, windows = 0;
  uint64_t submitted_texts = 0;  // texts the device ran (= texts unless a deadline dropped a window)
  uint64_t kept_rows = 0;        // rows an earlier run kept for batches it finished (not computed again)
  uint64_t real_tokens = 0;      // tokens of the texts in the batches run
  uint64_t computed_tokens = 0;  // token rows the device ran (padding would count here; packed batches have none)
  StageTime read, tokenize, batch, write;
  double device_busy = -1;   // from the backend, when it can tell
  double result_wait = 0;    // writer blocked on results: the host waiting for the device
  double seconds = 0;
  uint64_t host_syncs = 0;
  bool stopped_early = false;  // stop_after_seconds (or a cancel) cut the input short
  bool cancelled = false;      // the cancel flag cut it short
  int64_t batch_tokens = 0;    // the token budget used: the one asked for, halved once per...
  int memory_halvings = 0;     // ...time the device ran out of memory for its workspace
  std::string input_sha256;  // fingerprint of all bytes read (the whole input once complete)
  uint64_t input_bytes = 0;
};

// Width of each output row: pooled dims, or the number of labels. Throws
// Error (invalid_argument) for RowProduct::tokens, which this pipeline does not make.
int64_t pipeline_row_width(const LoadedEncoder& encoder, const EncodePipelineOptions& options);

// What the run's summary says when the device had no room for the token
// budget asked for: "the device had no room for --batch-tokens N: ran with M
// (halved k times)".
std::string memory_halving_note(const PipelineStats& stats, int64_t asked_batch_tokens);

// Runs the whole input through the encoder. Throws Error on a bad record
// (unless skipping), a read failure, or a device error; the sink has then
// seen a prefix of the rows, in order.
PipelineStats run_encode_pipeline(const LoadedEncoder& encoder, Backend& backend, const Tokenizer& tokenizer,
                                  const EncodePipelineOptions& options, RowSink& sink,
                                  const std::function<void(const PipelineProgress&)>& progress = {});

}  // namespace stoke
