// `stoke embed`: sentence vectors for every input record, in input order,
// through the overlapped pipeline into crash-safe shards with a manifest
// (DESIGN "Output folders", docs/output-format.md); resumable, and splittable
// into tasks for job arrays.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/trace.h"
#include "jobs/common_options.h"
#include "jobs/int8_quality.h"
#include "pipeline/encode_pipeline.h"

namespace stoke {

// The most tasks a job splits into (--num-shards, and a count from the environment).
constexpr uint64_t kMaxEmbedTasks = 1'000'000;

struct EmbedOptions {
  CommonOptions common;
  std::string output;                 // --output DIR
  std::string pooling;                // --pooling ("" = from the model's files, else mean)
  std::optional<bool> normalize;      // --normalize / --no-normalize
  int64_t dimensions = 0;             // --dimensions D (0 = all)
  std::string prompt;                 // --prompt TEXT
  std::string prompt_name;            // --prompt-name NAME
  DType output_dtype = DType::f32;     // --output-dtype f32|f16: what the .npy files hold
  int64_t max_batch_size = 256;       // --max-batch-size
  bool overwrite = false;             // --overwrite
  bool resume = false;                // --resume
  bool skip_bad_records = false;      // --on-error skip (stop: the default)
  uint64_t sort_window = 65536;       // --sort-window (records)
  uint64_t shard_size = 100000;       // --shard-size (rows)
  uint64_t shard_index = 0;           // --shard-index i
  uint64_t num_shards = 1;            // --num-shards N
  // --shard-index auto / --num-shards auto (given together): index and count
  // from the scheduler's environment (jobs/task_environment.h); the manifest's
  // task.source says which.
  bool shard_index_auto = false, num_shards_auto = false;
  // --partition records|files: record r -> task r mod N (every task reads the
  // whole input), or input file f -> task f mod N (a task reads only its files).
  bool partition_files = false;
  bool serial = false;                // --serial: no overlap (for comparison)
  bool debug_sync_each_batch = false; // --debug-sync-each-batch: a host sync per batch (for doctor's tests)
  double min_centered_cosine = 0.99;  // --min-centered-cosine: below it, an int8 run warns (jobs/int8_quality.h)
  // --chunk-tokens N --chunk-overlap M --chunk-boundary B --late-chunking
  // --pool-chunks P (docs/pipeline.md "Long documents"): chunking is off at N = 0.
  ChunkOptions chunks;
  // --outputs dense,sparse,colbert (any of them; default dense): bge-m3's
  // lexical weights and ColBERT vectors from the same forward (docs/models.md).
  struct Outputs {
    bool dense = true, sparse = false, colbert = false;
    bool given = false;  // --outputs was named (a ColBERT model's default is colbert alone)
    bool only_dense() const { return dense && !sparse && !colbert; }
  } outputs;
  // --role query|document (default document): which side of retrieval the
  // texts are on — a ColBERT model prefixes and expands queries and drops
  // skiplist tokens of documents (model/colbert_model.h). An identity field.
  TextRole role = TextRole::document;
  // --sparse-top-k K: keep each row's K largest sparse weights (0: all), as
  // sentence-transformers' max_active_dims. An identity field.
  int64_t sparse_top_k = 0;
  // Set by doctor and tune, not by flags.
  double stop_after_seconds = 0;      // read records for this long, then finish what was read
  Trace* trace = nullptr;             // record into this trace (device spans included)
  std::function<void(const std::string&)> on_thread_start;  // every pipeline thread and the device thread
  bool int8_quality_sample = true;    // tune's trials measure int8 against their own f32 trial: false
  // Set by the Python binding from another thread (Ctrl-C): the run stops
  // between batches as a kill would stop it — the folder keeps its last
  // commit, resumable — and returns with EmbedSummary::cancelled.
  const std::atomic<bool>* cancel = nullptr;
};

// Task counts past any scheduler's (--num-shards; RELIABILITY 16).
constexpr int64_t kMaxTasks = 1'000'000;
// The `uses` bit of the output folder's options (--output, --overwrite,
// --resume, --min-centered-cosine): under `stoke embed` and `stoke doctor
// embed`, not `stoke tune embed` (its trials write temporary folders).
constexpr unsigned kEmbedOutputOptions = 1u << 16;
// embed's options, declared once (jobs/option_table.h): the common options
// it takes, then its own. The CLI, --config and Python's embed_job read it.
const OptionTable<EmbedOptions>& embed_option_table();

struct EmbedSummary {
  uint64_t texts = 0, tokens = 0, truncated = 0, replaced_utf8 = 0, batches = 0;
  uint64_t chunked_records = 0;       // chunked runs: the records the rows (texts) are chunks of
  uint64_t records = 0, skipped = 0, other_tasks = 0, resumed = 0, shards = 0;
  bool already_complete = false;
  bool cancelled = false;             // EmbedOptions::cancel stopped it: the output is its last commit
  std::vector<std::string> notes;     // what resume did
  // --precision int8: the manifest's "quality" (measured now, or kept from
  // the first run); nullopt for other precisions and unmeasured runs.
  std::optional<EmbedQuality> quality;
  std::string bound_by;               // the stage that bounded the run, in words
  std::string stage_report;           // busy / waiting per stage, one line each
  std::string gpu_report;             // "gpu: util ..." (jobs/gpu_usage.h); "" when not sampled
  std::vector<std::string> gemm_fallbacks;  // GEMMs on the plain kernel (jobs/gemm_fallback_report.h)
  double padding_efficiency = 1.0;
  int64_t dims = 0, max_length = 0;
  std::string pooling, precision, device;
  bool normalize = false;
  double seconds = 0;
  uint64_t host_syncs = 0;
  // What doctor and tune read.
  PipelineStats pipeline;
  int workers = 1;
  int64_t batch_tokens = 0;
  uint64_t sort_window = 0;
  bool native_bf16 = false;           // the device multiplies bf16 natively
};

EmbedSummary run_embed(const EmbedOptions& options);

}  // namespace stoke
