// `stoke doctor --trace FILE` on a trace `stoke serve --trace` wrote. A
// server's device waits for its clients as much as for its own pipeline, so
// the diagnosis reports where the time went rather than naming a bottleneck:
// throughput, device busy share, batch fill, host syncs per batch.
#include <cstdio>
#include <string>

#include "doctor/diagnose.h"

namespace stoke::doctor {

namespace {

std::string format(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

}  // namespace

Diagnosis diagnose_serve(const nlohmann::json& f) {
  Diagnosis d;
  d.job = "serve";
  d.device = f.at("device").get<std::string>();
  d.seconds = f.at("seconds").get<double>();
  const double busy_seconds = f.at("device_busy_seconds").get<double>();
  const auto requests = f.at("requests").get<uint64_t>();
  const auto texts = f.at("texts").get<uint64_t>();
  const auto tokens = f.at("tokens").get<uint64_t>();
  const auto batches = f.at("batches").get<uint64_t>();
  d.host_syncs = f.at("host_syncs").get<uint64_t>();
  d.steps = batches;
  d.bound = Bound::unknown;
  if (d.seconds > 0) {
    d.items_per_second = static_cast<double>(texts) / d.seconds;
    d.tokens_per_second = static_cast<double>(tokens) / d.seconds;
    d.device_busy = busy_seconds >= 0 ? busy_seconds / d.seconds : 0;
  }
  d.verdict = "served " + std::to_string(requests) + " requests (" + std::to_string(texts) + " texts) in " +
              format("%.1f s", d.seconds) +
              (busy_seconds >= 0 ? format("; the device was busy %.0f%% of the time", 100 * d.device_busy) : "");
  d.evidence.push_back(format("%.0f texts/s, %.0f tokens/s over the whole run (idle time between clients included)",
                              d.items_per_second, d.tokens_per_second));
  if (batches > 0) {
    d.evidence.push_back(format("%.0f batches, %.1f texts and %.0f tokens per batch on average",
                                static_cast<double>(batches), static_cast<double>(texts) / batches,
                                static_cast<double>(tokens) / batches));
    d.evidence.push_back(format("%.2f host syncs per batch", static_cast<double>(d.host_syncs) / batches));
  }
  const auto dropped = f.value("trace_dropped_events", uint64_t{0});
  if (dropped > 0)
    d.evidence.push_back("the trace keeps its first " + std::to_string(f.value("trace_event_limit", uint64_t{0})) +
                         " events; " + std::to_string(dropped) + " later ones were dropped (the timeline ends early)");
  if (batches > 0 && d.device_busy > 0.8 && static_cast<double>(texts) / batches < 4)
    d.advice.push_back("the device is busy with batches of few texts: --max-wait-ms 2 lets batches fill");
  if (d.advice.empty()) d.advice.push_back("none from the summary: the timeline shows each batch's stages");
  return d;
}

}  // namespace stoke::doctor
