// Tensors on any backend's device for tests: host tensors (support/host_tensors.h)
// uploaded, device tensors made, and read back after the work before them. The
// same code serves the CPU backends (whose "device" is host memory behind the
// executor) and CUDA.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "support/host_tensors.h"

namespace stoke::test {

// Device copies of host tensors, alive as long as this object.
class DeviceTensors {
 public:
  explicit DeviceTensors(Backend& b) : b_(b) {}
  ~DeviceTensors() { b_.drain(); }
  DeviceTensors(const DeviceTensors&) = delete;
  DeviceTensors& operator=(const DeviceTensors&) = delete;

  // A device tensor holding `host`'s values (an empty view stays empty). The
  // copy is enqueued: this object keeps its own host copy until it is done.
  TensorView upload(const host_tensors::HostTensor& host) {
    if (host.view.empty()) return TensorView{};
    const host_tensors::HostTensor& src = staged_.emplace_back(host);
    buffers_.push_back(b_.allocate(src.view.bytes()));
    TensorView v = src.view;
    v.data = buffers_.back()->data();
    b_.copy_to_device(v.data, src.view.data, src.view.bytes());
    return v;
  }
  // An uninitialised device tensor of the given dtype and shape.
  TensorView make(DType t, std::vector<int64_t> shape) {
    host_tensors::HostTensor h = host_tensors::host_tensor(t, std::move(shape));
    buffers_.push_back(b_.allocate(h.view.bytes()));
    TensorView v = h.view;
    v.data = buffers_.back()->data();
    return v;
  }
  // A device tensor of zeros.
  TensorView zeros(DType t, std::vector<int64_t> shape) { return upload(host_tensors::host_tensor(t, std::move(shape))); }
  // The device tensor's values, after waiting for the work before.
  host_tensors::HostTensor download(const TensorView& device) {
    host_tensors::HostTensor h = host_tensors::host_tensor(
        device.dtype, std::vector<int64_t>(device.dims.begin(), device.dims.begin() + device.rank));
    if (device.empty()) return h;
    b_.copy_to_host(h.view.data, device.data, device.bytes());
    b_.synchronize();
    return h;
  }

 private:
  Backend& b_;
  std::deque<host_tensors::HostTensor> staged_;  // a deque: the views into it stay put
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

}  // namespace stoke::test
