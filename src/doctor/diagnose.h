// The rules of `stoke doctor`: from a run's measurements to the one cause that
// bounds it, with the evidence and advice in numbers. Pure functions of the
// facts (so the rules are unit-tested on numbers, and a trace file's stored
// facts diagnose exactly like a live run).
#pragma once

#include <cstdint>
#include <string>
#include <nlohmann/json.hpp>

#include "doctor/diagnosis.h"

namespace stoke::doctor {

// The CPU shares behind the contention verdict, measured by the job (the CPU
// sampler and /proc/stat); both < 0 when unknown or not applicable (a GPU
// device's host thread waits on the device by design).
struct CpuShares {
  double compute = -1;  // fraction of one core the CPU device's thread used while it had work
  double others = -1;   // cores' worth of CPU other processes used during the run
};
// The contention rule: the compute thread got under ~70% of a core while it
// had work, and other processes used a noticeable share of the machine.
// Decided from measured shares only, never from how long the run took.
bool cpu_contended(const CpuShares& s);

// What a profiled embed/classify run measured.
struct EmbedFacts {
  double seconds = 0;          // the pipeline's wall time
  double device_busy = -1;     // seconds the device ran work (< 0: unknown)
  StageTime read, tokenize, batch, write;  // names filled by the caller
  double result_wait = 0;      // writer blocked on results
  uint64_t batches = 0, host_syncs = 0, texts = 0, real_tokens = 0, computed_tokens = 0;
  int workers = 1, cores = 1;
  int64_t batch_tokens = 0;    // the token budget
  uint64_t sort_window = 0;    // records sorted (and tokenized) together
  uint64_t windows = 0;        // windows the run went through
  std::string precision = "f32";
  bool native_bf16 = false;
  bool stopped_early = false;
  CpuShares cpu;
  std::vector<std::string> gemm_fallbacks;  // GEMMs on the backend's plain kernel, one line each
};

// What a profiled training run measured.
struct TrainFacts {
  double seconds = 0;          // the training loop's wall time
  double device_busy = -1;
  uint64_t steps = 0, samples = 0, tokens = 0, host_syncs = 0;
  uint64_t expected_syncs = 0; // log reads + evals + saves + the final model: what the run needs
  int64_t batch_size = 0, log_every = 0;
  std::string precision = "f32";
  bool native_bf16 = false;
  int cores = 1;
  CpuShares cpu;
  // Data parallelism (ranks > 1): the all-reduce, as rank 0 measured it.
  int ranks = 1;
  int64_t grad_accum = 1, bucket_mb = 25;
  double comm_seconds = 0;          // inside all-reduces (the communication thread)
  double comm_exposed_seconds = 0;  // the device waiting for them before optimizer steps
  uint64_t allreduce_bytes_per_step = 0;
  std::vector<std::string> gemm_fallbacks;  // GEMMs on the backend's plain kernel, one line each
};

// The communication rule: the device waited for the gradient all-reduce at
// least this share of the training loop's wall time.
inline constexpr double kCommunicationBoundShare = 0.2;

Diagnosis diagnose_embed(const EmbedFacts& facts);
Diagnosis diagnose_train(const TrainFacts& facts);
// The facts `stoke serve --trace` writes (diagnose_serve.cc).
Diagnosis diagnose_serve(const nlohmann::json& facts);

// Facts to and from JSON (stored in a trace's metadata, so `stoke doctor
// --trace FILE` diagnoses a trace written by any run).
nlohmann::json to_json(const EmbedFacts& f);
nlohmann::json to_json(const TrainFacts& f);
// {"job": "embed"|"train"|"serve", "facts": {...}} -> the diagnosis; throws Error(format).
Diagnosis diagnose_from_json(const nlohmann::json& metadata);

// The diagnosis as the terminal shows it.
std::string format_diagnosis(const Diagnosis& d);

}  // namespace stoke::doctor
