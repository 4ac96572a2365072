// Spans of work per thread, written as Chrome trace-event JSON (opens in
// Perfetto and chrome://tracing). Recording is cheap: a span is two clock
// reads and one push into a per-thread buffer; nothing is written until the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

namespace stoke {

class Trace {
 public:
  using Clock = std::chrono::steady_clock;

  struct Event {
    const char* name;      // static strings only: spans name stages, not data
    const char* category;
    int64_t start_us;
    int64_t duration_us;
    uint32_t thread;
    int64_t arg = -1;      // optional count (records, tokens), -1 when unused
  };

  Trace();
  void record(const char* name, const char* category, Clock::time_point start, Clock::time_point end,
              int64_t arg = -1);
  // Names the calling thread in the trace ("tokenizer-1", "writer").
  void name_thread(const std::string& name);
  // {"traceEvents": [...]}: the caller writes it (atomically) where asked.
  std::string to_json() const;
  size_t event_count() const;

 private:
  uint32_t thread_index();
  Clock::time_point origin_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
  std::vector<std::pair<uint32_t, std::string>> thread_names_;
  std::vector<std::thread::id> threads_;
};

// RAII span: records [construction, destruction) into a trace (nullptr: no-op).
class TraceSpan {
 public:
  TraceSpan(Trace* trace, const char* name, const char* category = "stage")
      : trace_(trace), name_(name), category_(category) {
    if (trace_) start_ = Trace::Clock::now();
  }
  ~TraceSpan() {
    if (trace_) trace_->record(name_, category_, start_, Trace::Clock::now(), arg_);
  }
  void set_arg(int64_t v) { arg_ = v; }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  Trace* trace_;
  const char* name_;
  const char* category_;
  Trace::Clock::time_point start_;
  int64_t arg_ = -1;
};

}  // namespace stoke
