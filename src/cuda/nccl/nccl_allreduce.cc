#include "cuda/nccl/nccl_allreduce.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <type_traits>

#include "core/error.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_internal.h"

namespace stoke::cuda {

namespace {

using Clock = std::chrono::steady_clock;

// NCCL is opened at run time (libnccl.so.2), not linked: the stoke binary
// then starts on machines without NCCL (every GPU job but a multi-GPU
// training run), and only that run needs the library — refused in one line
// when it is missing. The build needs nccl.h alone (its types and the
// function signatures checked below).
struct Nccl {
  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRankConfig) CommInitRankConfig = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclCommFinalize) CommFinalize = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  decltype(&::ncclGetLastError) GetLastError = nullptr;
  std::string error;  // why it could not be opened; "" when it was
};

const Nccl& nccl() {
  static const Nccl lib = [] {
    Nccl n;
    void* h = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      n.error = std::string("cannot load libnccl.so.2 (") + (e ? e : "not found") +
                "): install NCCL (the CUDA toolkit's lib, or libnccl2) where the loader finds it";
      return n;
    }
    auto get = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, symbol));
      if (!fn && n.error.empty()) n.error = std::string("libnccl.so.2 has no ") + symbol + " (NCCL 2.19 or later needed)";
    };
    get(n.GetVersion, "ncclGetVersion");
    get(n.GetUniqueId, "ncclGetUniqueId");
    get(n.CommInitRankConfig, "ncclCommInitRankConfig");
    get(n.CommGetAsyncError, "ncclCommGetAsyncError");
    get(n.CommAbort, "ncclCommAbort");
    get(n.CommFinalize, "ncclCommFinalize");
    get(n.CommDestroy, "ncclCommDestroy");
    get(n.GroupStart, "ncclGroupStart");
    get(n.GroupEnd, "ncclGroupEnd");
    get(n.AllReduce, "ncclAllReduce");
    get(n.GetErrorString, "ncclGetErrorString");
    get(n.GetLastError, "ncclGetLastError");
    return n;
  }();
  return lib;
}

// The loaded library, or Error(unsupported) saying why there is none.
const Nccl& need_nccl() {
  const Nccl& n = nccl();
  if (!n.error.empty()) throw Error(Errc::unsupported, "NCCL: " + n.error);
  return n;
}

std::string version_text() {
  int v = 0;
  if (nccl().GetVersion(&v) != ncclSuccess) return "NCCL";
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z from 2.9 on.
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

// Every NCCL call on the communicator is made under mu_ and only while it
// is not aborted: the watchdog may abort it from its own thread, after
// which comm_ is gone. The communicator is non-blocking, so no call holds
// the lock for long; waiting (settle) polls with the lock released.
class NcclAllReduce final : public DeviceAllReduce {
 public:
  NcclAllReduce(CudaBackend& backend, int rank, int ranks, const std::string& unique_id, double timeout_seconds)
      : backend_(backend), timeout_(timeout_seconds), name_(version_text()) {
    if (unique_id.size() != sizeof(ncclUniqueId))
      throw Error(Errc::invalid_argument, "NCCL unique id: " + std::to_string(unique_id.size()) + " bytes, expected " +
                                              std::to_string(sizeof(ncclUniqueId)));
    ncclUniqueId id;
    std::memcpy(&id, unique_id.data(), sizeof id);
    check_cuda(cudaSetDevice(backend_.impl().device), "cudaSetDevice");
    // Non-blocking: NCCL calls return at once (ncclInProgress) and the
    // caller polls, so a peer that never joins is a timeout, not a hang.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r = nccl().CommInitRankConfig(&comm_, ranks, id, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      if (comm_) nccl().CommAbort(comm_);
      throw Error(Errc::io, std::string("NCCL: ncclCommInitRankConfig failed: ") + nccl().GetErrorString(r));
    }
    settle("ncclCommInitRankConfig");
    check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    watchdog_ = std::thread([this] { watch(); });
  }

  // After the backend drained (the trainer's destructor): nothing of ours is
  // still on the stream. Finalize flushes; if it does not settle in time,
  // or failed, the communicator is aborted instead of destroyed.
  ~NcclAllReduce() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    if (!aborted_) {
      ncclResult_t st = nccl().CommFinalize(comm_);
      const Clock::time_point deadline = Clock::now() + timeout_duration();
      while (st == ncclInProgress && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (nccl().CommGetAsyncError(comm_, &st) != ncclSuccess) break;
      }
      if (st == ncclSuccess)
        nccl().CommDestroy(comm_);
      else
        nccl().CommAbort(comm_);
    }
    if (done_) cudaEventDestroy(done_);
  }

  std::string name() const override { return name_; }

  void enqueue_sum(float* data, const std::vector<std::pair<int64_t, int64_t>>& ranges) override {
    CudaBackend::Impl::Launch op(backend_.impl(), "nccl all-reduce");
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) throw Error(Errc::io, failure_);
      ncclResult_t r = nccl().GroupStart();
      for (size_t i = 0; i < ranges.size() && (r == ncclSuccess || r == ncclInProgress); ++i) {
        const int64_t begin = ranges[i].first, end = ranges[i].second;
        r = nccl().AllReduce(data + begin, data + begin, static_cast<size_t>(end - begin), ncclFloat32, ncclSum, comm_,
                          op.stream);
      }
      const ncclResult_t g = nccl().GroupEnd();
      if (r == ncclSuccess || r == ncclInProgress) r = g;
      if (r != ncclSuccess && r != ncclInProgress) abort_locked("ncclAllReduce failed: " + describe_locked(r));
      if (aborted_) throw Error(Errc::io, failure_);
    }
    // NCCL hands the group to its proxy: wait for that (host side; the GPU
    // is not waited for), bounded by the timeout.
    settle("ncclAllReduce");
    check_cuda(cudaEventRecord(done_, op.stream), "cudaEventRecord");
    std::lock_guard<std::mutex> lock(mu_);
    pending_since_ = Clock::now();
    pending_ = true;
  }

  void check() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.empty()) throw Error(Errc::io, failure_);
  }

 private:
  // Polls until the communicator is not in progress; an error or the
  // timeout aborts it and throws.
  void settle(const char* call) {
    const Clock::time_point deadline = Clock::now() + timeout_duration();
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (aborted_) throw Error(Errc::io, failure_);
        ncclResult_t st = ncclSuccess;
        const ncclResult_t r = nccl().CommGetAsyncError(comm_, &st);
        if (r != ncclSuccess) st = r;
        if (st == ncclSuccess) return;
        if (st != ncclInProgress)
          abort_locked(std::string(call) + " failed: " + describe_locked(st));
        else if (Clock::now() >= deadline)
          abort_locked(std::string(call) + " did not complete in " + seconds() + " (a rank never joined, or hangs)");
        if (aborted_) throw Error(Errc::io, failure_);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  // NCCL's text for r, and its last error message when it has one (mu_ held).
  std::string describe_locked(ncclResult_t r) const {
    std::string what = nccl().GetErrorString(r);
    const char* last = comm_ && !aborted_ ? nccl().GetLastError(comm_) : nullptr;
    if (last && *last) what += std::string(" (") + last + ")";
    return what;
  }

  // Records the failure once and aborts the communicator, so its kernels
  // return and the stream moves on (mu_ held).
  void abort_locked(const std::string& what) {
    if (failure_.empty())
      failure_ = "NCCL: " + what;  // the job names the rank (train_job.cc)
    if (!aborted_) {
      nccl().CommAbort(comm_);
      aborted_ = true;
    }
  }

  Clock::duration timeout_duration() const {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
  }
  std::string seconds() const { return std::to_string(static_cast<long long>(timeout_)) + " s"; }

  // The watchdog: an asynchronous NCCL error, or a step's collectives still
  // running `timeout_` after they were enqueued, aborts the communicator.
  void watch() {
    cudaSetDevice(backend_.impl().device);
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_ && !aborted_) {
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (stop_ || aborted_) break;
      ncclResult_t st = ncclSuccess;
      if (nccl().CommGetAsyncError(comm_, &st) == ncclSuccess && st != ncclSuccess && st != ncclInProgress) {
        abort_locked("asynchronous error: " + describe_locked(st));
        break;
      }
      if (!pending_) continue;
      const cudaError_t q = cudaEventQuery(done_);
      if (q == cudaSuccess) {
        pending_ = false;
      } else if (q != cudaErrorNotReady) {
        abort_locked(std::string("waiting for an all-reduce: ") + cudaGetErrorString(q));
      } else if (Clock::now() - pending_since_ > timeout_duration()) {
        abort_locked("an all-reduce did not complete in " + seconds() + " (a rank died or hangs)");
      }
    }
  }

  CudaBackend& backend_;
  const double timeout_;
  const std::string name_;
  ncclComm_t comm_ = nullptr;
  cudaEvent_t done_ = nullptr;  // recorded after each group: the watchdog's view of the device
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, pending_ = false, aborted_ = false;
  Clock::time_point pending_since_;
  std::string failure_;
  std::thread watchdog_;
};

}  // namespace

std::string nccl_unique_id() {
  need_nccl();
  ncclUniqueId id;
  const ncclResult_t r = nccl().GetUniqueId(&id);
  if (r != ncclSuccess) throw Error(Errc::io, std::string("ncclGetUniqueId failed: ") + nccl().GetErrorString(r));
  return std::string(reinterpret_cast<const char*>(&id), sizeof id);
}

std::unique_ptr<DeviceAllReduce> open_nccl_allreduce(CudaBackend& backend, int rank, int ranks,
                                                     const std::string& unique_id, double timeout_seconds) {
  need_nccl();
  if (!(timeout_seconds > 0)) throw Error(Errc::invalid_argument, "NCCL timeout must be positive");
  return std::make_unique<NcclAllReduce>(backend, rank, ranks, unique_id, timeout_seconds);
}

}  // namespace stoke::cuda
