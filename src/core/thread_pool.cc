#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>

namespace stoke {

size_t ThreadPool::default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

ThreadPool::ThreadPool(size_t threads, std::function<void(size_t)> on_start) {
  if (threads == 0) threads = default_threads();
  // The caller participates in parallel_for, so threads-1 helpers give `threads` in all.
  for (size_t i = 1; i < threads; ++i)
    workers_.emplace_back([this, i, on_start] {
      if (on_start) on_start(i);
      worker_loop();
    });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
      if (stop_ && tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  const size_t parts = std::min(n, workers_.size() + 1);
  if (parts == 1) {
    fn(0, n);
    return;
  }
  std::mutex done_mu;
  std::condition_variable done_cv;
  size_t remaining = parts - 1;
  std::exception_ptr first_error;

  auto chunk = [&](size_t p) {
    size_t begin = n * p / parts, end = n * (p + 1) / parts;
    try {
      fn(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(done_mu);
      if (!first_error) first_error = std::current_exception();
    }
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t p = 1; p < parts; ++p) {
      tasks_.emplace_back([&, p] {
        chunk(p);
        std::lock_guard<std::mutex> done_lock(done_mu);
        if (--remaining == 0) done_cv.notify_one();
      });
    }
  }
  cv_.notify_all();
  chunk(0);
  std::unique_lock<std::mutex> lock(done_mu);
  done_cv.wait(lock, [&] { return remaining == 0; });
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace stoke
