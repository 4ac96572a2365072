// The flags every job that reads texts shares (DESIGN "Conventions every job
// shares"), parsed once by the CLI and handed to the job.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/hf_hub_cache.h"
#include "jobs/option_table.h"
#include "jobs/precision.h"
#include "pipeline/record_reader.h"

namespace stoke {

// --device: "auto", "cpu", "cuda", "cuda:N", parsed once, where the text is
// set (the option table, Python's Model, a test's `o.device = "cpu"`): a
// bad text throws Error(invalid_argument) naming the flag and the accepted
// forms, before any job starts.
struct DeviceSpec {
  enum class Kind { automatic, cpu, cuda } kind = Kind::automatic;
  int index = 0;
  bool index_given = false;  // "cuda:N", not "cuda" (a data-parallel rank picks its own then)
  DeviceSpec() = default;
  DeviceSpec(const std::string& text);  // NOLINT: implicit, so a text sets it as the flag would
  DeviceSpec(const char* text) : DeviceSpec(std::string(text)) {}  // NOLINT
  std::string text() const;  // as written: auto, cpu, cuda, cuda:N
};
DeviceSpec parse_device(const std::string& text);

struct CommonOptions {
  std::string model;                     // --model DIR or hub id (the folder loaded, once resolved)
  std::string input = "-";               // --input FILE ("-" = stdin)
  std::vector<std::string> inputs;       // embed: every --input (files, folders, patterns); empty: `input`
  std::string input_format;              // --input-format jsonl|csv|tsv|text ("" = from the file name)
  std::string text_field = "text";       // --text-field
  std::string pair_field = "text_pair";  // --pair-field (optional in each record)
  std::string id_field;                  // --id-field ("" = record number)
  std::optional<int64_t> max_length;     // --max-length
  DeviceSpec device;                     // --device auto|cpu|cuda[:N]
  Precision precision = Precision::f32;  // --precision f32|bf16|f16|int8
  int workers = 0;                       // --workers (0 = one per core)
  int64_t batch_tokens = 16384;          // --batch-tokens
  std::string trace;                     // --trace FILE ("" = off)
  std::string config;                    // --config FILE (applied by the CLI)
  bool quiet = false;                    // --quiet: no progress, no summary
  double stop_timeout = 10;              // --stop-timeout: SIGTERM/SIGINT to exit at most (core/stop_request.h)
  // What --model said and what it resolved to (resolve_model_flag); unset
  // until then, and `model` is taken as a folder as it is.
  std::optional<ModelLocation> model_location;
};

// Which of the common options a job takes (a job neither lists nor accepts
// an option it ignores): the `uses` bits of common_option_table()'s entries.
enum CommonFlag : unsigned {
  kInput = 1,         // --input (train reads --train, with --input as its alias)
  kPairField = 2,     // embed never reads pairs
  kIdField = 4,       // train has no ids
  kDevice = 8,        // --device and --precision (tokenize runs no model)
  kBatchTokens = 16,  // the pipeline's token budget (embed, classify)
  kWorkers = 32,      // tokenizer threads
  kManyInputs = 64,   // --input takes several files, folders and patterns (embed)
  kRecords = 128,     // reads records from files: --input-format, --text-field (not serve: its texts come in requests)
  kStops = 256,       // writes output and stops cleanly on SIGTERM/SIGINT: --stop-timeout (serve has its drain)
};
constexpr unsigned kTokenizeFlags = kRecords | kInput | kPairField | kIdField | kWorkers;
constexpr unsigned kEmbedFlags = kStops | kRecords | kInput | kManyInputs | kIdField | kDevice | kBatchTokens | kWorkers;
constexpr unsigned kClassifyFlags = kStops | kRecords | kInput | kPairField | kIdField | kDevice | kBatchTokens | kWorkers;
constexpr unsigned kTrainFlags = kStops | kRecords | kPairField | kDevice | kWorkers;
constexpr unsigned kServeFlags = kDevice | kBatchTokens | kWorkers;  // texts come in requests

// The common options (DESIGN "Conventions every job shares"), declared once;
// an entry whose `uses` has bits is taken only by the jobs whose mask has
// one of them (a job's mask: kEmbedFlags, ...; job_takes says).
const OptionTable<CommonOptions>& common_option_table();
template <class O>
bool job_takes(const Option<O>& o, unsigned job_mask) {
  return (o.uses == ~0u || (o.uses & job_mask) != 0) && (o.unless & job_mask) == 0;
}

// Resolves --model once, before any job opens the folder: a local path stays
// as it is; a Hugging Face hub id ("org/name[@revision]") becomes its snapshot
// folder in the local cache (io/hf_hub_cache.h), or throws Error(not_found)
// saying where it looked and how to download it. `model` is then the folder
// to load; `model_location` keeps what the user said. Resolving twice is a no-op.
void resolve_model_flag(CommonOptions& options);

// The most tokenizer threads a job starts (RELIABILITY 16: thread counts are
// capped): 4 per core, never more than kMaxWorkersAbsolute. Past the cores
// more threads only contend; thousands exhaust the process's thread limit.
constexpr int kWorkersPerCore = 4, kMaxWorkersAbsolute = 256;
int max_workers();
// Why the cap is what it is, in words ("4 per core: this machine has 2 cores").
std::string max_workers_reason();
// The tokenizer threads a job starts when --workers is 0 (every job, the
// server and Python's Model): on the CPU backend one — the kernels use every
// core and tokenization is ~20x cheaper than the forward, so one keeps up;
// on a GPU the host's cores tokenize: all but one, at most 8.
int default_workers(const std::string& device_name);
// Checks the value forms of the common flags (workers, batch tokens, ...; the
// device and the precision are typed: checked where their text is parsed).
void validate_common_options(const CommonOptions& options);
// The record reader's settings for these flags: the format from --input-format,
// else from the file name. Plain text has no fields, so the default
// --pair-field is dropped there (an explicit other name is refused by the reader).
RecordReaderOptions record_reader_options(const CommonOptions& options);

}  // namespace stoke
