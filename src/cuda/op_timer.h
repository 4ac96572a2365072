// Device time per op, for traces: a pair of timing events around every op
// enqueued on the compute stream while a trace is attached. A collector
// thread (the trace's "gpu" track) waits for each op's end event in stream
// order and records the op as a span at its device start/end, mapped onto
// the host clock from a base event; the sum is the device's busy time. Costs
// two event records per op, so it runs only when a trace asks for it.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/trace.h"

namespace stoke::cuda {

class OpTimer {
 public:
  // `stream`: the compute stream of `device`. Records the base event now.
  OpTimer(int device, cudaStream_t stream, Trace* trace);
  // Waits until every span handed in is recorded (the caller drained the
  // stream first), then stops the collector.
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

  // Around one op's launches on the stream: begin() before, end() after.
  cudaEvent_t begin();
  void end(const char* name, cudaEvent_t start);
  // Device time inside timed ops so far.
  double busy_seconds() const { return static_cast<double>(busy_ns_.load(std::memory_order_relaxed)) * 1e-9; }

 private:
  struct Span {
    const char* name;
    cudaEvent_t start, end;
  };
  cudaEvent_t take_event();
  void collect();

  int device_;
  cudaStream_t stream_;
  Trace* trace_;
  cudaEvent_t base_ = nullptr;
  Trace::Clock::time_point host_base_;
  std::atomic<int64_t> busy_ns_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Span> pending_;
  std::vector<cudaEvent_t> free_events_;
  bool stop_ = false;
  std::thread collector_;
};

}  // namespace stoke::cuda
