// What `stoke doctor` found: where the time of a run went, the one cause that
// bounds it, the evidence, and advice with numbers. Produced by diagnose()
// from a run's measurements (or a trace file's), printed as text, and drawn
// as a self-contained HTML report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/utilization_sample.h"

namespace stoke::doctor {

enum class Bound {
  input,      // reading or tokenization starves the device
  transfer,   // host -> device copies (GPU only)
  sync,       // host syncs inside the loop stall the device
  launch,     // many small launches / tiny batches: fixed costs dominate
  padding,    // compute spent on padding
  compute,    // the device is busy: the run is as fast as the device
  contention, // the CPU device is the bottleneck, but other processes take its cores
  communication,  // data-parallel training: the gradient all-reduce on the critical path
  unknown,
};
const char* bound_name(Bound b);  // "input-bound", ...

// One stage of the pipeline (read, tokenize, batch, compute, write, ...):
// seconds busy, and seconds blocked on the stage before / after it.
struct StageTime {
  std::string name;
  int threads = 1;
  double busy = 0, wait_input = 0, wait_output = 0;
};

// A CPU-utilization sample of one thread (defined in core, where the sampler
// that takes it lives).
using UtilizationSample = stoke::UtilizationSample;

// A span of work on one thread (the timeline).
struct Span {
  std::string thread, name;
  double start = 0, duration = 0;  // seconds from the start of the run
};

struct Diagnosis {
  std::string job;                 // "embed", "train", "classify"
  std::string device;              // "cpu", "cuda:0"
  double seconds = 0;              // wall time of the profiled run
  double device_busy = 0;          // fraction of the wall time the device was running work (0..1)
  double items_per_second = 0;     // records/s (embed) or samples/s (train)
  double tokens_per_second = 0;
  uint64_t host_syncs = 0, steps = 0;  // steps: batches (embed) or optimizer steps (train)
  double padding_efficiency = 1;   // real tokens / computed tokens
  Bound bound = Bound::unknown;
  std::string verdict;             // one sentence: "input-bound: the device waited 63% of the time for tokenized batches"
  std::vector<std::string> evidence;  // the numbers behind it
  std::vector<std::string> advice;    // concrete flags with numbers: "--workers 1 -> 3"
  std::vector<StageTime> stages;
  std::vector<UtilizationSample> utilization;
  std::vector<Span> spans;         // may be empty (then the report has no timeline lanes)
};

}  // namespace stoke::doctor
