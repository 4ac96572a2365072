// The gradient all-reduce of data-parallel training, bucketed and overlapped
// with the backward as PyTorch's DDP does it: layer l's gradient is final
// once the last micro-batch of a step has run layer l's backward, so it is
// handed to a communication thread right there (in stream order, on the
// executor) while the executor goes on with layer l - 1. Before the
// optimizer step the executor waits for every bucket — that wait is the
// communication left on the critical path ("exposed"); the rest overlapped.
//
// Buckets follow the backward's order: the layers from the last down
// (neighbours merged up to bucket_bytes), then everything outside the layers
// (embeddings, MPNet's relative bias, pooler and head), whose gradients are
// final only after the whole backward.
//
// Every rank hands the same buckets in the same order (the same model and
// steps), so the collectives match. The host never waits: handing over and
// the final wait are executor work items (Backend::enqueue_host).
//
// On a device backend (CUDA) a DeviceAllReduce (NCCL) is given instead: a
// bucket that is final is enqueued on the device stream right there, in
// stream order after its layer's backward and before the next layer's, and
// the optimizer step that follows in the stream sees the sums — no thread,
// no wait. Its timing is the device's (not in ReduceStats).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/device_allreduce.h"
#include "dist/communicator.h"
#include "model/trainable_encoder.h"

namespace stoke::train {

struct ReduceStats {
  double comm_seconds = 0;     // the communication thread inside all-reduces
  double exposed_seconds = 0;  // the executor waiting for them before an optimizer step
  uint64_t steps = 0, buckets = 0;
  uint64_t bytes_per_step = 0;  // gradient bytes all-reduced per step (each rank)
};

class GradientReducer {
 public:
  // device: null on the CPU backend (MPI on the executor), else the device's all-reduce.
  GradientReducer(const TrainableEncoder& encoder, Backend& backend, dist::Communicator& comm,
                  int64_t bucket_bytes, DeviceAllReduce* device = nullptr);
  // Drains the backend (queued hand-overs reference this object), then stops the thread.
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Called while the last micro-batch of a step is enqueued, after layer
  // `layer`'s backward (-1: the whole backward): enqueues the hand-over of
  // every bucket that is now final.
  void layer_done(int64_t layer);
  // Enqueues the hand-over of any bucket not handed over yet (a rank whose
  // slice of the last micro-batch was empty ran no backward), then the wait
  // for all of this step's buckets. Enqueue before the optimizer step.
  void finish_step();

  size_t bucket_count() const { return buckets_.size(); }
  // Read when the executor is idle (after a host wait).
  ReduceStats stats() const;

 private:
  struct Bucket {
    std::vector<std::pair<int64_t, int64_t>> ranges;  // [begin, end) elements of the flat gradient
    int64_t last_layer = -1;                          // final once this layer's backward ran (-1: at the end)
  };
  void hand_over(size_t bucket);  // on the executor
  void communicate();             // the communication thread

  float* grad_;
  Backend& backend_;
  dist::Communicator& comm_;
  DeviceAllReduce* device_ = nullptr;
  std::vector<Bucket> buckets_;
  size_t next_ = 0;  // host: the next bucket to hand over this step

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<size_t> queue_;
  uint64_t handed_ = 0, reduced_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  ReduceStats stats_;
  std::thread thread_;
};

}  // namespace stoke::train
