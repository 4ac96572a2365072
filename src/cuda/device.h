// CUDA device discovery and error handling. Every CUDA runtime call goes
// through check_cuda(), which turns a failure into a typed CudaError naming the
// call and the code. Plain C++ header: callers need no CUDA headers.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"

namespace stoke::cuda {

class CudaError : public Error {
 public:
  CudaError(const std::string& call, int code, const std::string& code_name, const std::string& detail);
  const std::string& call() const { return call_; }
  int cuda_code() const { return code_; }  // the cudaError_t value

 private:
  std::string call_;
  int code_;
};

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  size_t total_memory = 0;
  int multiprocessors = 0;
};

// Every visible device; empty when there is no GPU or no driver (never throws for that).
std::vector<DeviceInfo> list_devices();
// A human-readable reason why no device is usable ("no CUDA driver", "no GPU"), or "" when one is.
std::string unavailable_reason();
// The device for `--device cuda:N`; throws Error(device) with one clear line when it is absent.
DeviceInfo require_device(int index);

}  // namespace stoke::cuda
