#include "cuda/device.h"

#include "cuda/cuda_internal.h"
#include "cuda/device_errors.h"

#include <cuda_runtime.h>

#include <string>

namespace stoke::cuda {

static_assert(cuda_code::memory_allocation == cudaErrorMemoryAllocation);
static_assert(cuda_code::insufficient_driver == cudaErrorInsufficientDriver);
static_assert(cuda_code::invalid_device_function == cudaErrorInvalidDeviceFunction);
static_assert(cuda_code::no_device == cudaErrorNoDevice);
static_assert(cuda_code::no_kernel_image == cudaErrorNoKernelImageForDevice);
static_assert(cuda_code::ecc_uncorrectable == cudaErrorECCUncorrectable);
static_assert(cuda_code::illegal_address == cudaErrorIllegalAddress);
static_assert(cuda_code::launch_timeout == cudaErrorLaunchTimeout);
static_assert(cuda_code::assert_failed == cudaErrorAssert);
static_assert(cuda_code::hardware_stack_error == cudaErrorHardwareStackError);
static_assert(cuda_code::illegal_instruction == cudaErrorIllegalInstruction);
static_assert(cuda_code::misaligned_address == cudaErrorMisalignedAddress);
static_assert(cuda_code::invalid_address_space == cudaErrorInvalidAddressSpace);
static_assert(cuda_code::invalid_pc == cudaErrorInvalidPc);
static_assert(cuda_code::launch_failure == cudaErrorLaunchFailure);

namespace {

// cudaGetDeviceCount fails (rather than returning 0) when there is no driver or
// no GPU; both simply mean "no device" to discovery.
int device_count(cudaError_t* why) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (why) *why = status;
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  return count;
}

// An empty kernel: whether the driver finds code of this build for a GPU.
__global__ void probe_kernel() {}

// "" when stoke's kernels run on GPU `index`, else why not: a build for
// sm_90 has no code an sm_80 GPU can run (newer GPUs compile its PTX); a
// context broken by an earlier fault fails the probe too, and says so
// (device_errors.h: each failure its own advice).
std::string arch_problem(int index, const cudaDeviceProp& prop) {
  int previous = 0;
  cudaGetDevice(&previous);
  if (cudaSetDevice(index) != cudaSuccess) {
    cudaGetLastError();
    return "cannot select it";
  }
  cudaFuncAttributes attr{};
  const cudaError_t status = cudaFuncGetAttributes(&attr, probe_kernel);
  cudaSetDevice(previous);
  if (status == cudaSuccess) return "";
  cudaGetLastError();
  if (is_sticky_fault(status))
    note_sticky_fault({static_cast<int>(status), cudaGetErrorName(status), "cudaFuncGetAttributes", last_op()});
  return device_probe_problem(status, cudaGetErrorName(status), prop.name, prop.major, prop.minor);
}

}  // namespace

CudaError::CudaError(const std::string& call, int code, const std::string& code_name,
                     const std::string& detail)
    : Error(Errc::device, call + " failed: " + code_name + " (" + std::to_string(code) + "): " + detail),
      call_(call),
      code_(code) {}

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> devices;
  const int count = device_count(nullptr);
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, i), "cudaGetDeviceProperties");
    DeviceInfo info;
    info.index = i;
    info.name = prop.name;
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    info.total_memory = prop.totalGlobalMem;
    info.multiprocessors = prop.multiProcessorCount;
    devices.push_back(info);
  }
  return devices;
}

std::string unavailable_reason() {
  if (const auto fault = sticky_fault()) return "GPU in an error state: " + fault->describe();
  cudaError_t why = cudaSuccess;
  const int count = device_count(&why);
  if (count > 0) {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    const std::string problem = arch_problem(0, prop);
    return problem.empty() ? "" : "GPU 0: " + problem;
  }
  switch (why) {
    case cudaErrorInsufficientDriver: return "no CUDA driver is installed (or it is older than the CUDA 13 runtime)";
    case cudaErrorNoDevice: return "no CUDA GPU is visible";
    case cudaSuccess: return "no CUDA GPU is visible";
    default: return std::string("CUDA is not usable: ") + cudaGetErrorName(why);
  }
}

DeviceInfo require_device(int index) {
  auto devices = list_devices();
  if (devices.empty()) {
    throw Error(Errc::device, "--device cuda:" + std::to_string(index) + ": " + unavailable_reason() +
                                  "; use --device cpu");
  }
  if (index < 0 || index >= static_cast<int>(devices.size())) {
    throw Error(Errc::device, "--device cuda:" + std::to_string(index) + ": no such GPU (" +
                                  std::to_string(devices.size()) + " visible: cuda:0..cuda:" +
                                  std::to_string(devices.size() - 1) + ")");
  }
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  const std::string problem = arch_problem(index, prop);
  if (!problem.empty()) throw Error(Errc::device, "--device cuda:" + std::to_string(index) + ": " + problem);
  return devices[static_cast<size_t>(index)];
}

}  // namespace stoke::cuda
