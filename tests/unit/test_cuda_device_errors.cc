// What a CUDA failure at device start tells the user (src/cuda/device_errors.h),
// checked on the CPU through the test hook that injects a fault: a missing
// kernel image gets the rebuild advice; a sticky fault (an earlier kernel's
// illegal address) gets its own name, the op it followed and "restart", never
// the rebuild advice; any other code is named as it is.
#include <gtest/gtest.h>

#include <string>

#include "cuda/device_errors.h"

namespace stoke {
namespace {

using cuda::device_probe_problem;

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Each test leaves the process's record as it found it (empty).
struct ForgetFaults {
  ~ForgetFaults() { cuda::clear_sticky_fault_for_tests(); }
};

TEST(CudaDeviceErrors, MissingKernelsAdviseARebuildForTheCardsArch) {
  ForgetFaults forget;
  for (int code : {cuda::cuda_code::no_kernel_image, cuda::cuda_code::invalid_device_function}) {
    const std::string msg = device_probe_problem(code, "cudaErrorNoKernelImageForDevice", "NVIDIA H100 80GB HBM3", 9, 0);
    EXPECT_TRUE(has(msg, "no kernels for it (NVIDIA H100 80GB HBM3, sm_90)")) << msg;
    EXPECT_TRUE(has(msg, "rebuild with -DSTOKE_CUDA_ARCHS=90")) << msg;
    EXPECT_FALSE(has(msg, "error state")) << msg;
  }
  EXPECT_FALSE(cuda::sticky_fault()) << "a missing kernel image is not a fault of the context";
}

TEST(CudaDeviceErrors, AStickyFaultIsNamedWithItsOpAndNeverCalledABuildProblem) {
  ForgetFaults forget;
  cuda::note_sticky_fault({cuda::cuda_code::illegal_address, "cudaErrorIllegalAddress", "cudaEventSynchronize",
                           "attention_backward"});
  const std::string sticky =
      device_probe_problem(cuda::cuda_code::illegal_address, "cudaErrorIllegalAddress", "NVIDIA H100", 9, 0);
  EXPECT_TRUE(has(sticky, "error state")) << sticky;
  EXPECT_TRUE(has(sticky, "cudaErrorIllegalAddress (700)")) << sticky;
  EXPECT_TRUE(has(sticky, "reported by cudaEventSynchronize after the op attention_backward")) << sticky;
  EXPECT_TRUE(has(sticky, "restarts")) << sticky;
  EXPECT_FALSE(has(sticky, "rebuild")) << sticky;
  const std::string no_kernels =
      device_probe_problem(cuda::cuda_code::no_kernel_image, "cudaErrorNoKernelImageForDevice", "NVIDIA H100", 9, 0);
  EXPECT_NE(sticky, no_kernels);
  // The first fault is the one reported: later calls fail with it again.
  cuda::note_sticky_fault({cuda::cuda_code::launch_failure, "cudaErrorLaunchFailure", "cudaMemcpyAsync", "pool"});
  ASSERT_TRUE(cuda::sticky_fault());
  EXPECT_EQ(cuda::sticky_fault()->code_name, "cudaErrorIllegalAddress");
  EXPECT_EQ(cuda::sticky_fault()->op, "attention_backward");
}

TEST(CudaDeviceErrors, AStickyCodeWithNoRecordStillSaysRestart) {
  ForgetFaults forget;
  const std::string msg = device_probe_problem(cuda::cuda_code::launch_failure, "cudaErrorLaunchFailure", "GPU", 9, 0);
  EXPECT_TRUE(has(msg, "cudaErrorLaunchFailure (719)")) << msg;
  EXPECT_TRUE(has(msg, "restarts")) << msg;
  EXPECT_FALSE(has(msg, "rebuild")) << msg;
}

TEST(CudaDeviceErrors, OtherCodesAreNamedAsTheyAre) {
  ForgetFaults forget;
  const std::string msg = device_probe_problem(46, "cudaErrorDevicesUnavailable", "NVIDIA H200", 9, 0);
  EXPECT_TRUE(has(msg, "cudaErrorDevicesUnavailable (46)")) << msg;
  EXPECT_FALSE(has(msg, "rebuild")) << msg;
  EXPECT_FALSE(has(msg, "error state")) << msg;
  EXPECT_FALSE(cuda::is_sticky_fault(cuda::cuda_code::memory_allocation));
  EXPECT_TRUE(cuda::is_sticky_fault(cuda::cuda_code::illegal_address));
  EXPECT_FALSE(cuda::is_missing_kernel_code(cuda::cuda_code::illegal_address));
}

}  // namespace
}  // namespace stoke
