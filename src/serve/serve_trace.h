// `stoke serve --trace FILE`: a Chrome trace (the format `stoke embed --trace`
// writes and `stoke doctor --trace` reads) of where the server's time went,
// per batch: tokenize, queue wait, copy, compute, scatter, write response,
// plus every server thread's CPU use (counters "cpu <thread>"). A server may
// run for days, so the trace keeps its first kServeTraceEvents events and
// counts the rest; it is written when the server stops (SIGTERM/SIGINT).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "core/cpu_sampler.h"
#include "core/trace.h"
#include "pipeline/request_batcher.h"

namespace stoke::serve {

// About 100 bytes of JSON each: a trace file of at most ~50 MB.
inline constexpr size_t kServeTraceEvents = 500'000;

// What the summary in the trace's "otherData" says of the run.
struct ServeTraceSummary {
  std::string model, device, precision;
  double seconds = 0;
  uint64_t requests = 0;
  RequestBatcherStats batcher;
  int workers = 0;
  int64_t io_threads = 0;
};

class ServeTrace {
 public:
  // Checks at once that FILE's folder exists (a server that runs for hours
  // must not learn at exit that it cannot write its trace).
  explicit ServeTrace(const std::string& path);
  ~ServeTrace();
  ServeTrace(const ServeTrace&) = delete;
  ServeTrace& operator=(const ServeTrace&) = delete;

  Trace* trace() { return trace_.get(); }
  // Names the calling thread in the trace and watches its CPU use.
  void on_thread_start(const std::string& name);
  // Stops sampling, then writes the trace (atomically) with the summary.
  void write(const ServeTraceSummary& summary);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<Trace> trace_;
  std::unique_ptr<CpuSampler> sampler_;
};

}  // namespace stoke::serve
