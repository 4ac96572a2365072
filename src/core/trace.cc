#include "core/trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/error.h"
#include "core/json_write.h"

namespace stoke {

Trace::Trace() : origin_(Clock::now()) {}

uint32_t Trace::thread_index() {
  // Called with mu_ held. Few threads, so a linear search is fine.
  const auto id = std::this_thread::get_id();
  auto it = std::find(threads_.begin(), threads_.end(), id);
  if (it != threads_.end()) return static_cast<uint32_t>(it - threads_.begin());
  threads_.push_back(id);
  return static_cast<uint32_t>(threads_.size() - 1);
}

void Trace::record(const char* name, const char* category, Clock::time_point start, Clock::time_point end,
                   int64_t arg) {
  const auto us = [&](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t - origin_).count();
  };
  std::lock_guard<std::mutex> lock(mu_);
  if (full()) {
    ++dropped_;
    return;
  }
  events_.push_back(Event{name, category, us(start), std::max<int64_t>(us(end) - us(start), 0), thread_index(), arg});
}

void Trace::name_thread(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  thread_names_.emplace_back(thread_index(), name);
}

void Trace::record_counter(const std::string& name, Clock::time_point when, double value) {
  if (!std::isfinite(value)) return;
  const int64_t ts = std::chrono::duration_cast<std::chrono::microseconds>(when - origin_).count();
  std::lock_guard<std::mutex> lock(mu_);
  if (full()) {
    ++dropped_;
    return;
  }
  counters_.push_back(Counter{name, ts, value});
}

void Trace::set_metadata(std::string json_object_text) {
  const size_t first = json_object_text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || json_object_text[first] != '{')
    throw Error(Errc::invalid_argument, "trace metadata must be a JSON object, got: " + json_object_text.substr(0, 40));
  std::lock_guard<std::mutex> lock(mu_);
  metadata_ = std::move(json_object_text);
}

void Trace::set_event_limit(size_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  event_limit_ = limit;
}

uint64_t Trace::dropped_events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

size_t Trace::event_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

std::string Trace::to_json() const {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  std::lock_guard<std::mutex> lock(mu_);
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (const auto& [tid, name] : thread_names_) {
    sep();
    out += "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": " + std::to_string(tid) +
           ", \"args\": {\"name\": ";
    json_append_string(out, name);
    out += "}}";
  }
  for (const Event& e : events_) {
    sep();
    out += "{\"name\": ";
    json_append_string(out, e.name);
    out += ", \"cat\": ";
    json_append_string(out, e.category);
    out += ", \"ph\": \"X\", \"pid\": 1, \"tid\": " + std::to_string(e.thread) + ", \"ts\": " +
           std::to_string(e.start_us) + ", \"dur\": " + std::to_string(e.duration_us);
    if (e.arg >= 0) out += ", \"args\": {\"n\": " + std::to_string(e.arg) + "}";
    out += "}";
  }
  for (const Counter& c : counters_) {
    sep();
    out += "{\"name\": ";
    json_append_string(out, c.name);
    // Shortest text that reads back as the same double.
    char buf[32];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, c.value);
    out += ", \"ph\": \"C\", \"pid\": 1, \"ts\": " + std::to_string(c.ts_us) + ", \"args\": {\"value\": ";
    out.append(buf, end);
    out += "}}";
  }
  out += "\n]";
  if (!metadata_.empty()) {
    out += ",\n\"otherData\": ";
    out += metadata_;
  }
  out += "}\n";
  return out;
}

}  // namespace stoke
