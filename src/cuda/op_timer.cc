#include "cuda/op_timer.h"

#include "cuda/cuda_internal.h"

namespace stoke::cuda {

OpTimer::OpTimer(int device, cudaStream_t stream, Trace* trace) : device_(device), stream_(stream), trace_(trace) {
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  check_cuda(cudaEventCreate(&base_), "cudaEventCreate");
  // The base event's completion is "now" on the host: everything before it
  // has run, and the host takes its clock right after.
  check_cuda(cudaEventRecord(base_, stream_), "cudaEventRecord");
  check_cuda(cudaEventSynchronize(base_), "cudaEventSynchronize");
  host_base_ = Trace::Clock::now();
  collector_ = std::thread([this] { collect(); });
}

OpTimer::~OpTimer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  collector_.join();
  for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
  cudaEventDestroy(base_);
}

cudaEvent_t OpTimer::take_event() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_events_.empty()) {
      cudaEvent_t e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
  }
  // Timing on (these are measured); blocking sync, so the collector sleeps
  // while it waits instead of spinning on a core the tokenizers need.
  cudaEvent_t e = nullptr;
  check_cuda(cudaEventCreateWithFlags(&e, cudaEventBlockingSync), "cudaEventCreateWithFlags");
  return e;
}

cudaEvent_t OpTimer::begin() {
  cudaEvent_t e = take_event();
  check_cuda(cudaEventRecord(e, stream_), "cudaEventRecord");
  return e;
}

void OpTimer::end(const char* name, cudaEvent_t start) {
  cudaEvent_t e = take_event();
  check_cuda(cudaEventRecord(e, stream_), "cudaEventRecord");
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(Span{name, start, e});
  }
  cv_.notify_one();
}

void OpTimer::collect() {
  cudaSetDevice(device_);
  if (trace_) trace_->name_thread("gpu");
  for (;;) {
    Span span;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopped, and every span is recorded
      span = pending_.front();
      pending_.pop_front();
    }
    float from_base = 0, duration = 0;
    // A failed stream (an error in some kernel) ends timing quietly: the
    // error itself reaches the job through its own wait.
    const bool ok = cudaEventSynchronize(span.end) == cudaSuccess &&
                    cudaEventElapsedTime(&from_base, base_, span.start) == cudaSuccess &&
                    cudaEventElapsedTime(&duration, span.start, span.end) == cudaSuccess;
    if (ok) {
      const auto start = host_base_ + std::chrono::nanoseconds(static_cast<int64_t>(from_base * 1e6));
      const auto end = start + std::chrono::nanoseconds(static_cast<int64_t>(duration * 1e6));
      busy_ns_.fetch_add(static_cast<int64_t>(duration * 1e6), std::memory_order_relaxed);
      if (trace_) trace_->record(span.name, "device", start, end);
    } else {
      cudaGetLastError();
    }
    std::lock_guard<std::mutex> lock(mu_);
    free_events_.push_back(span.start);
    free_events_.push_back(span.end);
  }
}

}  // namespace stoke::cuda
