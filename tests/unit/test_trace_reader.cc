// Trace counters and metadata, and reading a trace file back (`stoke doctor
// --trace FILE`): what Trace writes, parse_trace must read, with the times,
// thread names and summary intact; malformed files are format errors that name
// the file.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/trace.h"
#include "doctor/trace_reader.h"

namespace stoke {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

TEST(TraceReader, ReadsBackSpansCountersAndMetadata) {
  Trace trace;
  const auto t0 = trace.origin();
  trace.name_thread("executor");
  trace.record("forward", "stage", t0 + 10ms, t0 + 30ms, 64);
  std::thread worker([&] {
    trace.name_thread("tokenizer-0");
    trace.record("tokenize", "stage", t0 + 12ms, t0 + 15ms);
  });
  worker.join();
  trace.record_counter("cpu executor", t0 + 110ms, 0.93);
  trace.record_counter("cpu tokenizer-0", t0 + 110ms, 0.25);
  trace.record_counter("queue depth", t0 + 110ms, 3);  // a counter, but not utilization
  trace.record_counter("cpu executor", t0 + 210ms, std::numeric_limits<double>::quiet_NaN());  // dropped
  trace.set_metadata(R"({"job": "embed", "host_syncs": 2})");

  const std::string text = trace.to_json();
  const json doc = json::parse(text);  // valid JSON as written
  ASSERT_TRUE(doc.contains("otherData"));
  EXPECT_EQ(doc["otherData"]["job"], "embed");
  int counters = 0;
  for (const auto& e : doc["traceEvents"]) counters += e["ph"] == "C";
  EXPECT_EQ(counters, 3);
  EXPECT_EQ(trace.event_count(), 2u);  // spans only

  const doctor::ParsedTrace p = doctor::parse_trace(text, "trace.json");
  ASSERT_EQ(p.spans.size(), 2u);
  // Seconds from the earliest event (the forward span at 10 ms), sorted by start.
  EXPECT_EQ(p.spans[0].thread, "executor");
  EXPECT_EQ(p.spans[0].name, "forward");
  EXPECT_NEAR(p.spans[0].start, 0.0, 1e-9);
  EXPECT_NEAR(p.spans[0].duration, 0.020, 1e-6);
  EXPECT_EQ(p.spans[1].thread, "tokenizer-0");
  EXPECT_EQ(p.spans[1].name, "tokenize");
  EXPECT_NEAR(p.spans[1].start, 0.002, 1e-6);
  EXPECT_NEAR(p.spans[1].duration, 0.003, 1e-6);
  ASSERT_EQ(p.utilization.size(), 2u);
  for (const auto& u : p.utilization) {
    EXPECT_NEAR(u.t, 0.100, 1e-6);
    if (u.thread == "executor")
      EXPECT_DOUBLE_EQ(u.fraction, 0.93);  // shortest round-trip text
    else
      EXPECT_EQ(u.thread, "tokenizer-0");
  }
  EXPECT_EQ(json::parse(p.metadata_json), json::parse(R"({"job": "embed", "host_syncs": 2})"));
}

TEST(TraceReader, NoMetadataNoCountersAndTheArrayForm) {
  Trace empty;
  const doctor::ParsedTrace e = doctor::parse_trace(empty.to_json(), "empty.json");
  EXPECT_TRUE(e.spans.empty());
  EXPECT_TRUE(e.utilization.empty());
  EXPECT_EQ(e.metadata_json, "");
  EXPECT_FALSE(json::parse(empty.to_json()).contains("otherData"));

  // Other writers: the bare array form, string tids, an unnamed thread, B/E events (skipped).
  const doctor::ParsedTrace a = doctor::parse_trace(R"([
    {"name": "thread_name", "ph": "M", "pid": 1, "tid": "io", "args": {"name": "reader"}},
    {"name": "read", "ph": "X", "pid": 1, "tid": "io", "ts": 500, "dur": 250},
    {"name": "step", "ph": "X", "pid": 1, "tid": 7, "ts": 1000},
    {"name": "x", "ph": "B", "pid": 1, "tid": 7, "ts": 0},
    {"name": "cpu reader", "ph": "C", "pid": 1, "ts": 1500, "args": {"busy": 0.5}}
  ])", "array.json");
  ASSERT_EQ(a.spans.size(), 2u);
  EXPECT_EQ(a.spans[0].thread, "reader");
  EXPECT_NEAR(a.spans[0].duration, 250e-6, 1e-12);
  EXPECT_EQ(a.spans[1].thread, "thread 7");
  EXPECT_EQ(a.spans[1].duration, 0.0);
  ASSERT_EQ(a.utilization.size(), 1u);
  EXPECT_EQ(a.utilization[0].thread, "reader");
  EXPECT_DOUBLE_EQ(a.utilization[0].fraction, 0.5);
  EXPECT_NEAR(a.utilization[0].t, 1000e-6, 1e-12);
}

TEST(TraceReader, ThreadsSharingANameKeepTheirOwnLanes) {
  const doctor::ParsedTrace p = doctor::parse_trace(R"({"traceEvents": [
    {"name": "thread_name", "ph": "M", "pid": 1, "tid": 3, "args": {"name": "tokenizer"}},
    {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "tokenizer"}},
    {"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "writer"}},
    {"name": "tokenize", "ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 5},
    {"name": "tokenize", "ph": "X", "pid": 1, "tid": 3, "ts": 1, "dur": 5},
    {"name": "write", "ph": "X", "pid": 1, "tid": 2, "ts": 2, "dur": 5}
  ]})", "t.json");
  ASSERT_EQ(p.spans.size(), 3u);
  EXPECT_EQ(p.spans[0].thread, "tokenizer #2");  // tid 1 was named second
  EXPECT_EQ(p.spans[1].thread, "tokenizer #1");
  EXPECT_EQ(p.spans[2].thread, "writer");
}

TEST(TraceReader, MalformedFilesAreFormatErrorsNamingTheFile) {
  const char* bad[] = {
      "not json at all",
      "42",
      "{}",
      R"({"traceEvents": {}})",
      R"({"traceEvents": [1]})",
      R"({"traceEvents": [{"name": "a", "pid": 1}]})",                            // no ph
      R"({"traceEvents": [{"name": "a", "ph": "X", "pid": 1, "dur": 3}]})",       // no ts
      R"({"traceEvents": [{"name": "a", "ph": "X", "ts": "1", "dur": 3}]})",      // ts not a number
      R"({"traceEvents": [{"name": "a", "ph": "X", "ts": 1, "dur": -3}]})",
      R"({"traceEvents": [{"ph": "X", "ts": 1, "dur": 3}]})",                     // no name
      R"({"traceEvents": [{"name": "cpu a", "ph": "C", "ts": 1}]})",              // no args
      R"({"traceEvents": [{"name": "cpu a", "ph": "C", "ts": 1, "args": {"v": "x"}}]})",
      R"({"traceEvents": [{"name": "thread_name", "ph": "M", "tid": 1, "args": {}}]})",
      R"({"traceEvents": [], "otherData": [1, 2]})",
      R"({"traceEvents": [{"name": "a", "ph": "X", "ts": 1, "dur": 3}])",  // truncated
  };
  for (const char* text : bad) {
    try {
      doctor::parse_trace(text, "runs/trace-7.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::format) << text;
      EXPECT_NE(std::string(e.what()).find("runs/trace-7.json"), std::string::npos) << e.what();
    }
  }
}

TEST(TraceReader, MetadataMustBeAnObject) {
  Trace trace;
  EXPECT_THROW(trace.set_metadata("[1, 2]"), Error);
  EXPECT_THROW(trace.set_metadata(""), Error);
  trace.set_metadata(" {\"a\": 1}");
  trace.set_metadata("{\"b\": 2}");  // replaces
  EXPECT_EQ(doctor::parse_trace(trace.to_json(), "t").metadata_json, R"({"b":2})");
}

// A long-running server's trace is bounded: past the limit, spans and
// counters are dropped and counted, and the file still reads back.
TEST(TraceReader, EventLimitKeepsTheFirstEventsAndCountsTheRest) {
  Trace trace;
  trace.set_event_limit(5);
  const auto t0 = trace.origin();
  for (int i = 0; i < 4; ++i) trace.record("copy", "stage", t0 + i * 1ms, t0 + i * 1ms + 500us);
  trace.record_counter("cpu io-0", t0 + 5ms, 0.5);
  trace.record("late", "stage", t0 + 6ms, t0 + 7ms);
  trace.record_counter("cpu io-0", t0 + 8ms, 0.25);
  EXPECT_EQ(trace.event_count(), 4u);
  EXPECT_EQ(trace.dropped_events(), 2u);
  const doctor::ParsedTrace parsed = doctor::parse_trace(trace.to_json(), "t");
  EXPECT_EQ(parsed.spans.size(), 4u);
  EXPECT_EQ(parsed.utilization.size(), 1u);
  for (const auto& span : parsed.spans) EXPECT_EQ(span.name, "copy");
}

}  // namespace
}  // namespace stoke
