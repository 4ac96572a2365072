// CUDA device discovery on whatever machine runs the tests: with no GPU (CI),
// discovery answers "none" with a reason and never throws, and asking for a
// device is one clear error line; with a GPU, the device is described.
#include <gtest/gtest.h>

#include "core/error.h"

#ifdef STOKE_HAVE_CUDA
#include "cuda/device.h"

namespace stoke {
namespace {

TEST(CudaDevice, DiscoveryAnswersWithoutThrowing) {
  std::vector<cuda::DeviceInfo> devices;
  ASSERT_NO_THROW(devices = cuda::list_devices());
  const std::string reason = cuda::unavailable_reason();
  if (devices.empty()) {
    EXPECT_FALSE(reason.empty());
    try {
      cuda::require_device(0);
      FAIL() << "require_device(0) succeeded with no device";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::device);
      const std::string msg = e.what();
      EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
      EXPECT_NE(msg.find("--device cpu"), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  } else {
    EXPECT_TRUE(reason.empty()) << reason;
    const auto info = cuda::require_device(0);
    EXPECT_FALSE(info.name.empty());
    EXPECT_GT(info.total_memory, 0u);
    EXPECT_THROW(cuda::require_device(static_cast<int>(devices.size())), Error);
  }
}

TEST(CudaDevice, ErrorsNameTheCallAndTheCode) {
  const cuda::CudaError e("cudaMalloc", 2, "cudaErrorMemoryAllocation", "out of memory");
  EXPECT_EQ(e.code(), Errc::device);
  EXPECT_EQ(e.call(), "cudaMalloc");
  EXPECT_EQ(std::string(e.what()), "cudaMalloc failed: cudaErrorMemoryAllocation (2): out of memory");
}

}  // namespace
}  // namespace stoke

#else

TEST(CudaDevice, NotBuilt) {
  GTEST_SKIP() << "stoke was configured without the CUDA backend (STOKE_CUDA=OFF or no nvcc)";
}

#endif
