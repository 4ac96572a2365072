// What every job that can be traced (embed, classify, train) does with its
// threads: CPU-utilization samples of each thread it names, when the trace is
// its own (a caller that passes its trace in, as doctor does, watches the
// threads itself through its hook); the backend's op spans in the trace; and
// the backend's thread named "device" for both.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "core/cpu_sampler.h"
#include "core/trace.h"

namespace stoke {

class JobThreads {
 public:
  using Hook = std::function<void(const std::string&)>;
  // own: the job's own trace (nullptr: none); trace: the one the backend
  // records into (own, or the caller's; nullptr: none); inherited: the
  // caller's hook for the threads the job names (may be empty). Backend and
  // traces must outlive this object.
  JobThreads(Backend& backend, Trace* own, Trace* trace, Hook inherited);
  // Stops sampling and detaches the backend from the trace (every span of
  // the work enqueued so far is in it then). Idempotent; the destructor
  // calls it too.
  void stop();
  ~JobThreads() { stop(); }
  JobThreads(const JobThreads&) = delete;
  JobThreads& operator=(const JobThreads&) = delete;

  // Called first on every thread the job runs ("reader", "tokenizer-0", ...).
  const Hook& on_thread_start() const { return hook_; }

 private:
  Backend& backend_;
  Trace* trace_;
  std::unique_ptr<CpuSampler> sampler_;
  Hook hook_;
  bool stopped_ = false;
};

}  // namespace stoke
