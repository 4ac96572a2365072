// What a CUDA error means to the user, from its code alone, and the
// process's record of the first sticky fault. Plain C++ (no CUDA headers):
// tests/unit/test_cuda_device_errors.cc checks the advice on the CPU, and
// device.cu static_asserts these codes against the runtime's enum.
//
// Two failures look alike at device start and need opposite advice:
// - no code for this GPU (cudaErrorNoKernelImageForDevice,
//   cudaErrorInvalidDeviceFunction): a build question — rebuild for its arch;
// - a sticky fault (an illegal address, a kernel's trap, ...): an earlier
//   kernel broke the process's CUDA context; every later call fails with the
//   same code until the process exits. Rebuilding would not help; the op
//   that faulted is what to report.
#pragma once

#include <mutex>
#include <optional>
#include <string>

namespace stoke::cuda {

// cudaError_t values (driver_types.h, CUDA 13).
namespace cuda_code {
constexpr int memory_allocation = 2;
constexpr int insufficient_driver = 35;
constexpr int invalid_device_function = 98;
constexpr int no_device = 100;
constexpr int no_kernel_image = 209;
constexpr int ecc_uncorrectable = 214;
constexpr int illegal_address = 700;
constexpr int launch_timeout = 702;
constexpr int assert_failed = 710;
constexpr int hardware_stack_error = 714;
constexpr int illegal_instruction = 715;
constexpr int misaligned_address = 716;
constexpr int invalid_address_space = 717;
constexpr int invalid_pc = 718;
constexpr int launch_failure = 719;
}  // namespace cuda_code

inline bool is_missing_kernel_code(int code) {
  return code == cuda_code::no_kernel_image || code == cuda_code::invalid_device_function;
}

// The errors that leave the context unusable (CUDA's documentation: "the
// process must be terminated and relaunched").
inline bool is_sticky_fault(int code) {
  switch (code) {
    case cuda_code::ecc_uncorrectable:
    case cuda_code::illegal_address:
    case cuda_code::launch_timeout:
    case cuda_code::assert_failed:
    case cuda_code::hardware_stack_error:
    case cuda_code::illegal_instruction:
    case cuda_code::misaligned_address:
    case cuda_code::invalid_address_space:
    case cuda_code::invalid_pc:
    case cuda_code::launch_failure: return true;
    default: return false;
  }
}

// The first sticky fault this process saw: its code's name, the call that
// reported it, and the last op enqueued before (kernels run asynchronously:
// the fault belongs to that op or one shortly before it; with a sync after
// each op, as the op tests do, to that op).
struct StickyFault {
  int code = 0;
  std::string code_name, call, op;
  std::string describe() const {
    return code_name + " (" + std::to_string(code) + "), reported by " + call +
           (op.empty() ? std::string() : " after the op " + op) +
           ": a kernel faulted and this process's CUDA context is unusable until it restarts";
  }
};

namespace detail {
struct StickyFaultRecord {
  std::mutex mu;
  std::optional<StickyFault> first;
};
inline StickyFaultRecord& sticky_fault_record() {
  static StickyFaultRecord r;
  return r;
}
}  // namespace detail

// Keeps the first sticky fault (later ones repeat it). Called by check_cuda;
// also the tests' hook to inject one.
inline void note_sticky_fault(const StickyFault& f) {
  auto& r = detail::sticky_fault_record();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.first) r.first = f;
}
inline std::optional<StickyFault> sticky_fault() {
  auto& r = detail::sticky_fault_record();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.first;
}
// For tests only: forget an injected fault.
inline void clear_sticky_fault_for_tests() {
  auto& r = detail::sticky_fault_record();
  std::lock_guard<std::mutex> lock(r.mu);
  r.first.reset();
}

// Why GPU `index` (named `gpu`, compute capability major.minor) cannot run
// stoke's kernels, given the code its probe launch returned — each failure
// with its own advice.
inline std::string device_probe_problem(int code, const std::string& code_name, const std::string& gpu, int major,
                                        int minor) {
  const std::string arch = std::to_string(major) + std::to_string(minor);
  if (is_missing_kernel_code(code))
    return "this stoke has no kernels for it (" + gpu + ", sm_" + arch + "): rebuild with -DSTOKE_CUDA_ARCHS=" + arch;
  if (is_sticky_fault(code)) {
    const std::optional<StickyFault> first = sticky_fault();
    return "it is in an error state: " +
           (first ? first->describe()
                  : code_name + " (" + std::to_string(code) +
                        "): a kernel faulted and this process's CUDA context is unusable until it restarts");
  }
  if (code == cuda_code::memory_allocation) return "it is out of memory (" + code_name + ") before stoke started";
  return "its probe launch failed with " + code_name + " (" + std::to_string(code) + ") on " + gpu + ", sm_" + arch;
}

}  // namespace stoke::cuda
