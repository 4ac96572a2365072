// The server's Prometheus metrics: requests by route and status, latency
// histograms (queue, tokenization, inference, total), batch size and batch
// token histograms, and the batcher's gauges — written in the Prometheus text
// exposition format for GET /metrics.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/request_batcher.h"

namespace stoke::serve {

// Cumulative buckets with fixed upper bounds (+Inf implied), sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // name_bucket{le=...}, name_sum, name_count lines; `labels` is "" or `k="v",`.
  void write(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void count_request(const std::string& route, int status);
  // Where a batched request's time went (BatchRequest's timings).
  struct Stages {
    double tokenize = 0, queue = 0, inference = 0;
  };
  void observe_request(double total_seconds, const Stages* stages);  // stages: nullptr when no batch ran
  void observe_batch(int64_t sequences, int64_t tokens);
  // The whole exposition; in_flight and the batcher's counters read now.
  std::string render(const RequestBatcherStats& stats, int64_t in_flight, bool ready) const;

  uint64_t requests() const { return requests_.load(); }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> by_route_status_;
  std::atomic<uint64_t> requests_{0};
  Histogram total_, queue_, tokenize_, inference_, batch_size_, batch_tokens_;
};

}  // namespace stoke::serve
