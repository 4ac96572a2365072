// The gradient all-reduce of data-parallel training on a device whose work
// the host does not run (a GPU): sums over the ranks enqueued on the
// backend's stream, in stream order, so the host never waits for them (NCCL
// on the CUDA backend: cuda/nccl/). The CPU backend needs none: its
// all-reduce runs on the executor through dist::Communicator
// (train/gradient_reducer.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace stoke {

class DeviceAllReduce {
 public:
  virtual ~DeviceAllReduce() = default;
  virtual std::string name() const = 0;  // "NCCL 2.28.9"

  // Enqueues, after the work enqueued before it and before the work enqueued
  // after it, the in-place element-wise sum over the ranks of each range
  // [begin, end) of the f32 device array `data`. Every rank enqueues the same
  // ranges in the same order. Throws Error when the communicator has failed.
  virtual void enqueue_sum(float* data, const std::vector<std::pair<int64_t, int64_t>>& ranges) = 0;

  // Throws the communicator's failure (an error NCCL reported, or a
  // collective that did not complete in time and was aborted) as one
  // Error(io) line; a host check, no wait for the device.
  virtual void check() = 0;
};

}  // namespace stoke
