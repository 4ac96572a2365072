// Spans of work per thread, written as Chrome trace-event JSON (opens in
// Perfetto and chrome://tracing). Recording is cheap: a span is two clock
// reads and one push into a per-thread buffer; nothing is written until the end.
// Besides spans ("ph":"X") a trace holds counters ("ph":"C", drawn as a track:
// the CPU sampler's "cpu <thread>" fractions) and one metadata object, written
// as the top-level "otherData" key (viewers ignore or list it; `stoke doctor
// --trace FILE` reads the run's summary from it).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstddef>
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
  // One value of the counter track `name` at `when` ("cpu executor", 0.93).
  // Non-finite values are dropped (JSON has no NaN). Counters are few (one per
  // watched thread per sampler tick), so they may own their names.
  void record_counter(const std::string& name, Clock::time_point when, double value);
  // A JSON object's text, written as the top-level "otherData" value; replaces
  // any earlier one. Throws Error(invalid_argument) unless it starts with '{'
  // (the text is not parsed here: core has no JSON parser).
  void set_metadata(std::string json_object_text);
  // {"traceEvents": [...], "otherData": {...}}: the caller writes it (atomically) where asked.
  std::string to_json() const;
  size_t event_count() const;  // spans only
  // At most `limit` spans and counters are kept (a long-running server's
  // trace stays bounded): later ones are dropped and counted. Default: no limit.
  void set_event_limit(size_t limit);
  uint64_t dropped_events() const;
  // The time every event is measured from (the trace's construction).
  Clock::time_point origin() const { return origin_; }

 private:
  struct Counter {
    std::string name;
    int64_t ts_us;
    double value;
  };
  uint32_t thread_index();
  Clock::time_point origin_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
  std::vector<Counter> counters_;
  std::string metadata_;
  std::vector<std::pair<uint32_t, std::string>> thread_names_;
  std::vector<std::thread::id> threads_;
  size_t event_limit_ = SIZE_MAX;
  uint64_t dropped_ = 0;
  bool full() const { return events_.size() + counters_.size() >= event_limit_; }  // mu_ held
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
