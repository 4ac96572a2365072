#include "train/gradient_reducer.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "core/error.h"

namespace stoke::train {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void add_range(std::vector<std::pair<int64_t, int64_t>>& ranges, int64_t begin, int64_t end) {
  if (!ranges.empty() && ranges.back().second == begin)
    ranges.back().second = end;  // adjacent: one call
  else
    ranges.emplace_back(begin, end);
}

}  // namespace

GradientReducer::GradientReducer(const TrainableEncoder& encoder, Backend& backend, dist::Communicator& comm,
                                 int64_t bucket_bytes, DeviceAllReduce* device)
    : grad_(encoder.grad_data()), backend_(backend), comm_(comm), device_(device) {
  if (!device && !backend.can_enqueue_host())
    throw Error(Errc::unsupported, "data-parallel training on " + backend.name() +
                                       ": the host all-reduce runs on the CPU backend's executor, and no device "
                                       "all-reduce (NCCL) was given (dist/data_parallel_path.h decides which)");
  if (bucket_bytes <= 0) throw Error(Errc::invalid_argument, "--bucket-mb must be positive");
  // Each layer's slots, and the rest, as sorted ranges.
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> by_layer;  // -1: outside the layers
  std::vector<ParamSlot> slots = encoder.layout.slots();
  std::sort(slots.begin(), slots.end(), [](const ParamSlot& a, const ParamSlot& b) { return a.offset < b.offset; });
  for (const ParamSlot& s : slots) add_range(by_layer[s.layer >= 0 ? s.layer : -1], s.offset, s.offset + s.numel);
  // Layers from the last down, merged until a bucket holds bucket_bytes.
  Bucket open;
  int64_t open_bytes = 0;
  for (auto it = by_layer.rbegin(); it != by_layer.rend(); ++it) {
    if (it->first < 0) continue;
    for (const auto& r : it->second) {
      open.ranges.push_back(r);
      open_bytes += (r.second - r.first) * 4;
    }
    open.last_layer = it->first;
    if (open_bytes >= bucket_bytes) {
      buckets_.push_back(std::move(open));
      open = Bucket{};
      open_bytes = 0;
    }
  }
  if (!open.ranges.empty()) buckets_.push_back(std::move(open));
  Bucket rest;
  rest.ranges = by_layer[-1];
  rest.last_layer = -1;
  if (!rest.ranges.empty()) buckets_.push_back(std::move(rest));
  for (const Bucket& b : buckets_)
    for (const auto& r : b.ranges) stats_.bytes_per_step += static_cast<uint64_t>(r.second - r.first) * 4;
  if (!device_) thread_ = std::thread([this] { communicate(); });
}

GradientReducer::~GradientReducer() {
  backend_.drain();
  if (device_) return;  // no thread
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void GradientReducer::layer_done(int64_t layer) {
  // Bucket k is final when the backward has passed its lowest layer (layers
  // run from the last down; -1 = the whole backward).
  while (next_ < buckets_.size()) {
    const int64_t need = buckets_[next_].last_layer;
    if (layer >= 0 && (need < 0 || layer > need)) break;
    const size_t k = next_++;
    if (device_) {  // on the device stream, in order: nothing to hand over or wait for
      device_->enqueue_sum(grad_, buckets_[k].ranges);
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.buckets;
      continue;
    }
    backend_.enqueue_host("allreduce hand-over", [this, k] { hand_over(k); });
  }
}

void GradientReducer::finish_step() {
  layer_done(-1);
  next_ = 0;
  if (device_) {
    device_->check();  // a failure the watchdog saw stops the run here, on every rank that sees it
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.steps;
    return;
  }
  backend_.enqueue_host("allreduce wait", [this] {
    const double t0 = now_seconds();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return reduced_ == handed_ || error_; });
    stats_.exposed_seconds += now_seconds() - t0;
    ++stats_.steps;
    // A failed all-reduce is the step's error (sticky on the backend, as a kernel's).
    if (error_) std::rethrow_exception(error_);
  });
}

void GradientReducer::hand_over(size_t bucket) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(bucket);
    ++handed_;
  }
  cv_.notify_all();
}

void GradientReducer::communicate() {
  for (;;) {
    size_t k = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      k = queue_.front();
      queue_.pop_front();
    }
    const double t0 = now_seconds();
    std::exception_ptr error;
    try {
      for (const auto& r : buckets_[k].ranges)
        comm_.allreduce_sum(grad_ + r.first, static_cast<size_t>(r.second - r.first));
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.comm_seconds += now_seconds() - t0;
      ++stats_.buckets;
      ++reduced_;
      if (error && !error_) error_ = error;
    }
    cv_.notify_all();
  }
}

ReduceStats GradientReducer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace stoke::train
