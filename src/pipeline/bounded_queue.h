// The arrow between two pipeline stages: a FIFO with a fixed capacity, so a
// fast producer blocks instead of filling memory (backpressure), and a stage
// that fails can close every queue to stop the others. Each side's blocked
// time is measured: a consumer that waits long is starved by the stage before
// it, a producer that waits long is held back by the stage after it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

namespace stoke {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // Blocks while full. False when the queue was closed (the item is dropped).
  bool push(T item) {
    std::unique_lock lock(mu_);
    if (items_.size() >= capacity_ && !closed_) {
      const auto t0 = std::chrono::steady_clock::now();
      not_full_.wait(lock, [&] { return items_.size() < capacity_ || closed_; });
      push_wait_ += std::chrono::steady_clock::now() - t0;
    }
    if (closed_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  // Blocks while empty. nullopt once the queue is closed and drained — or at
  // once when it was aborted.
  std::optional<T> pop() {
    std::unique_lock lock(mu_);
    if (items_.empty() && !closed_) {
      const auto t0 = std::chrono::steady_clock::now();
      not_empty_.wait(lock, [&] { return !items_.empty() || closed_; });
      pop_wait_ += std::chrono::steady_clock::now() - t0;
    }
    if (aborted_ || items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  // No more items: consumers drain what is queued, then see the end.
  void close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    not_empty_.notify_all();
    not_full_.notify_all();
  }
  // A stage failed: everyone stops now, queued items are dropped.
  void abort() {
    std::lock_guard lock(mu_);
    closed_ = aborted_ = true;
    items_.clear();
    not_empty_.notify_all();
    not_full_.notify_all();
  }

  double push_wait_seconds() const {
    std::lock_guard lock(mu_);
    return std::chrono::duration<double>(push_wait_).count();
  }
  double pop_wait_seconds() const {
    std::lock_guard lock(mu_);
    return std::chrono::duration<double>(pop_wait_).count();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::deque<T> items_;
  size_t capacity_;
  bool closed_ = false, aborted_ = false;
  std::chrono::steady_clock::duration push_wait_{}, pop_wait_{};
};

}  // namespace stoke
