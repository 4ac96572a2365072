#include "serve/serve_trace.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"

namespace stoke::serve {

ServeTrace::ServeTrace(const std::string& path) : path_(path) {
  namespace fs = std::filesystem;
  const fs::path parent = fs::absolute(fs::path(path)).parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec))
    throw Error(Errc::invalid_argument, "--trace " + path + ": its folder " + parent.string() + " does not exist");
  if (fs::is_directory(fs::path(path), ec))
    throw Error(Errc::invalid_argument, "--trace " + path + ": is a folder (expected a file name)");
  trace_ = std::make_unique<Trace>();
  trace_->set_event_limit(kServeTraceEvents);
  sampler_ = std::make_unique<CpuSampler>(trace_.get());
  sampler_->start();
}

ServeTrace::~ServeTrace() {
  if (sampler_) sampler_->stop();
}

void ServeTrace::on_thread_start(const std::string& name) {
  trace_->name_thread(name);
  sampler_->watch_current_thread(name);
}

void ServeTrace::write(const ServeTraceSummary& s) {
  sampler_->stop();
  const RequestBatcherStats& b = s.batcher;
  const nlohmann::json facts = {
      {"seconds", s.seconds},
      {"requests", s.requests},
      {"texts", b.texts},
      {"tokens", b.tokens},
      {"batches", b.batches},
      {"host_syncs", b.host_syncs},
      {"cancelled_texts", b.cancelled_texts},
      {"device_busy_seconds", b.device_busy_seconds},
      {"batch_tokens", b.batch_tokens},
      {"workers", s.workers},
      {"io_threads", s.io_threads},
      {"model", s.model},
      {"device", s.device},
      {"precision", s.precision},
      {"trace_event_limit", kServeTraceEvents},
      {"trace_dropped_events", trace_->dropped_events()},
  };
  trace_->set_metadata(nlohmann::json{{"job", "serve"}, {"facts", facts}}.dump());
  write_file_atomic(path_, std::string_view(trace_->to_json()));
}

}  // namespace stoke::serve
