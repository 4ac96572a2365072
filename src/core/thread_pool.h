// A fixed pool of worker threads for data-parallel host work (tokenizing a
// batch, say). parallel_for splits [0, n) into contiguous chunks, one per
// worker, and returns when all are done; the first exception thrown by any
// chunk is rethrown in the caller.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace stoke {

class ThreadPool {
 public:
  // threads == 0 means one per hardware thread.
  // on_start(i) runs first on helper thread i (1-based; the caller is 0), e.g.
  // to register it with a profiler.
  explicit ThreadPool(size_t threads = 0, std::function<void(size_t)> on_start = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size(); }

  // Runs fn(begin, end) over chunks of [0, n). The calling thread takes a chunk too.
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn);

  static size_t default_threads();

 private:
  void worker_loop();

  std::vector<std::thread> workers_;
  std::deque<std::function<void()>> tasks_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

}  // namespace stoke
