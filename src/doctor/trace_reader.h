// Reading a Chrome trace-event JSON file (as Trace::to_json writes it) back
// into the doctor's data model, so `stoke doctor --trace FILE` can diagnose a
// run from the file alone.
#pragma once

#include <string>
#include <vector>

#include "doctor/diagnosis.h"

namespace stoke::doctor {

struct ParsedTrace {
  std::vector<Span> spans;                     // "ph":"X" events, sorted by start
  std::vector<UtilizationSample> utilization;  // "ph":"C" events named "cpu <thread>", sorted by time
  std::string metadata_json;                   // the "otherData" object's text, "" if absent
};

// Times are seconds from the earliest timed event (span or counter). Threads
// are named by the "M" thread_name events; a thread without one is
// "thread <tid>", and threads sharing a name are told apart as "name #1",
// "name #2" (utilization counters keep the name they were given). Both the object form {"traceEvents": [...]} and the bare
// array form are read; event kinds other than X, C and M are skipped.
// Throws Error(Errc::format) naming `label` (the file) on malformed input.
ParsedTrace parse_trace(const std::string& json_text, const std::string& label);

}  // namespace stoke::doctor
