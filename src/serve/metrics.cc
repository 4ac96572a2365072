#include "serve/metrics.h"

#include <algorithm>

#include "serve/response_json.h"

namespace stoke::serve {

namespace {

std::vector<double> latency_bounds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

std::vector<double> powers_of_two(double top) {
  std::vector<double> b;
  for (double v = 1; v <= top; v *= 2) b.push_back(v);
  return b;
}

void metric_header(std::string& out, const std::string& name, const std::string& help, const char* type) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void gauge(std::string& out, const std::string& name, const std::string& help, double v, const char* type = "gauge") {
  metric_header(out, name, help, type);
  out += name + " ";
  append_double(out, v);
  out += "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  std::lock_guard lock(mu_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& help) const {
  metric_header(out, name, help, "histogram");
  std::lock_guard lock(mu_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"";
    if (i < bounds_.size()) {
      append_double(out, bounds_[i]);
    } else {
      out += "+Inf";
    }
    out += "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum ";
  append_double(out, sum_);
  out += "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : total_(latency_bounds()),
      queue_(latency_bounds()),
      tokenize_(latency_bounds()),
      inference_(latency_bounds()),
      batch_size_(powers_of_two(4096)),
      batch_tokens_(powers_of_two(1 << 20)) {}

void Metrics::count_request(const std::string& route, int status) {
  requests_.fetch_add(1);
  std::lock_guard lock(mu_);
  ++by_route_status_[{route, status}];
}

void Metrics::observe_request(double total_seconds, const Stages* stages) {
  total_.observe(total_seconds);
  if (!stages) return;
  queue_.observe(stages->queue);
  tokenize_.observe(stages->tokenize);
  inference_.observe(stages->inference);
}

void Metrics::observe_batch(int64_t sequences, int64_t tokens) {
  batch_size_.observe(static_cast<double>(sequences));
  batch_tokens_.observe(static_cast<double>(tokens));
}

std::string Metrics::render(const RequestBatcherStats& s, int64_t in_flight, bool ready) const {
  std::string out;
  metric_header(out, "stoke_requests_total", "HTTP requests answered, by route and status", "counter");
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, n] : by_route_status_)
      out += "stoke_requests_total{route=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
             std::to_string(n) + "\n";
  }
  gauge(out, "stoke_ready", "1 once the warm-up forward pass succeeded and while not draining", ready ? 1 : 0);
  gauge(out, "stoke_requests_in_flight", "Requests received and not yet answered", static_cast<double>(in_flight));
  gauge(out, "stoke_queue_texts", "Texts waiting in the batcher (tokenized or not)", static_cast<double>(s.queued_texts));
  gauge(out, "stoke_texts_total", "Texts the batcher took", static_cast<double>(s.texts), "counter");
  gauge(out, "stoke_tokens_total", "Tokens the batcher ran", static_cast<double>(s.tokens), "counter");
  gauge(out, "stoke_batches_total", "Batches run", static_cast<double>(s.batches), "counter");
  gauge(out, "stoke_cancelled_texts_total", "Texts dropped before the device (client gone)",
        static_cast<double>(s.cancelled_texts), "counter");
  gauge(out, "stoke_host_syncs_total", "Host syncs of the backend", static_cast<double>(s.host_syncs), "counter");
  gauge(out, "stoke_batch_token_budget", "Token budget per batch in use", static_cast<double>(s.batch_tokens));
  if (s.device_busy_seconds >= 0 && s.seconds > 0)
    gauge(out, "stoke_device_busy_ratio", "Device busy time over wall time since start",
          s.device_busy_seconds / s.seconds);
  total_.write(out, "stoke_request_duration_seconds", "Request received to response ready");
  queue_.write(out, "stoke_queue_duration_seconds", "Tokenized to first batch enqueued");
  tokenize_.write(out, "stoke_tokenization_duration_seconds", "Submitted to tokenized");
  inference_.write(out, "stoke_inference_duration_seconds", "First batch enqueued to last row collected");
  batch_size_.write(out, "stoke_batch_size", "Sequences per batch");
  batch_tokens_.write(out, "stoke_batch_tokens", "Tokens per batch");
  return out;
}

}  // namespace stoke::serve
