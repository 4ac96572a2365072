#include "jobs/job_threads.h"

#include "cpu/cpu_backend.h"

namespace stoke {

JobThreads::JobThreads(Backend& backend, Trace* own, Trace* trace, Hook inherited)
    : backend_(backend), trace_(trace), hook_(std::move(inherited)) {
  if (own) {
    sampler_ = std::make_unique<CpuSampler>(own);
    hook_ = [s = sampler_.get()](const std::string& name) { s->watch_current_thread(name); };
    sampler_->start();
  }
  if (trace_) backend_.set_trace(trace_);
  // The CPU backend computes on a thread of its own: it is watched too.
  if (auto* cpu_backend = dynamic_cast<cpu::CpuBackend*>(&backend_); cpu_backend && hook_)
    cpu_backend->enqueue("name thread", [hook = hook_] { hook("device"); });
}

void JobThreads::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (sampler_) sampler_->stop();
  if (trace_) backend_.set_trace(nullptr);
}

}  // namespace stoke
