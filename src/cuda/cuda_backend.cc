#include "cuda/cuda_backend.h"

#include <string>

#include "core/error.h"
#include "cuda/cuda_internal.h"
#include "cuda/cuda_ops.h"
#include "cuda/gemm_routes.h"

namespace stoke::cuda {

namespace {

// cuBLASLt's scratch: enough for its fastest Hopper kernels (NVIDIA suggests
// 32 MiB on sm_90); allocated once, so GEMMs never allocate and capture.
constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;
// Partials of 64-row chunks for N = 3072 at T = 65,536 take 12 MiB; the
// embedding backward's sort ~28 bytes a token (T up to ~1.1 million).
constexpr size_t kReduceWorkspaceBytes = size_t{32} << 20;
// The backward's 16-bit dy, in row chunks of this size: 64 MiB holds
// 10,922 rows of bert-base's widest dy (N = 3072), so a 32k-token step
// takes the FFN's products in 3 chunks and the others in 1 (a larger one
// would buy nothing: each chunk's GEMMs are already ~50 GFLOP).
constexpr size_t kConvertWorkspaceBytes = size_t{64} << 20;

class DeviceBuffer final : public Buffer {
 public:
  DeviceBuffer(std::shared_ptr<CachingAllocator> allocator, size_t bytes) : allocator_(std::move(allocator)) {
    data_ = allocator_->allocate(bytes, &rounded_);
    bytes_ = bytes;
  }
  ~DeviceBuffer() override { allocator_->release(data_, rounded_); }

 private:
  std::shared_ptr<CachingAllocator> allocator_;  // outlives every buffer it gave out
  size_t rounded_ = 0;
};

class PinnedBuffer final : public Buffer {
 public:
  explicit PinnedBuffer(size_t bytes) {
    if (bytes) check_cuda(cudaHostAlloc(&data_, bytes, cudaHostAllocPortable), "cudaHostAlloc");
    bytes_ = bytes;
  }
  ~PinnedBuffer() override {
    if (data_) cudaFreeHost(data_);
  }
};

// A user-visible event: a blocking-sync event, so a waiting host thread
// sleeps instead of spinning on a core the tokenizer needs.
class CudaEvent final : public Event {
 public:
  CudaEvent() { check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventBlockingSync), "cudaEventCreateWithFlags"); }
  ~CudaEvent() override { cudaEventDestroy(event); }
  cudaEvent_t event = nullptr;
};

class CudaGraph final : public Graph {
 public:
  ~CudaGraph() override {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};

}  // namespace

// ---- the allocator -----------------------------------------------------------

size_t CachingAllocator::size_class(size_t bytes) {
  // 512-byte steps below 1 MiB, 2 MiB steps above: the encoder's workspace
  // comes in a handful of sizes, and a block of the same class is reused as is.
  if (bytes <= (size_t{1} << 20)) return (bytes + 511) / 512 * 512;
  return (bytes + (size_t{2} << 20) - 1) / (size_t{2} << 20) * (size_t{2} << 20);
}

void* CachingAllocator::allocate(size_t bytes, size_t* rounded) {
  // A size this large is an overflow upstream; rounding it up would wrap.
  if (bytes > (SIZE_MAX >> 1)) throw OutOfMemoryError("allocation of " + std::to_string(bytes) + " bytes refused");
  const size_t size = size_class(bytes == 0 ? 1 : bytes);
  *rounded = size;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_ -= size;
      in_use_ += size;
      peak_ = in_use_ > peak_ ? in_use_ : peak_;
      return p;
    }
  }
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  void* p = nullptr;
  cudaError_t status = cudaMalloc(&p, size);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    empty_cache();  // blocks of other sizes may be all that stands in the way
    status = cudaMalloc(&p, size);
  }
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    throw OutOfMemoryError("cudaMalloc of " + std::to_string(size >> 20) + " MiB failed: the GPU is out of memory (" +
                           std::to_string(free_bytes >> 20) + " MiB free of " + std::to_string(total >> 20) +
                           " MiB; stoke holds " + std::to_string(in_use() >> 20) + " MiB)");
  }
  check_cuda(status, "cudaMalloc");
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ += size;
  peak_ = in_use_ > peak_ ? in_use_ : peak_;
  return p;
}

void CachingAllocator::release(void* ptr, size_t rounded) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  free_[rounded].push_back(ptr);
  in_use_ -= rounded;
  cached_ += rounded;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [size, blocks] : free_)
    for (void* p : blocks) cudaFree(p);
  free_.clear();
  cached_ = 0;
}

CachingAllocator::~CachingAllocator() { empty_cache(); }

size_t CachingAllocator::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

size_t CachingAllocator::cached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}

size_t CachingAllocator::peak() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

// ---- stream order ------------------------------------------------------------

cudaStream_t CudaBackend::Impl::compute_stream() {
  // The enqueueing thread (the pipeline's batcher, say) need not be the one
  // that made the backend: kernels launch on the calling thread's device.
  // (While capturing, begin_capture set it on this thread already.)
  if (!capturing) check_cuda(cudaSetDevice(device), "cudaSetDevice");
  if (h2d_pending) {
    check_cuda(cudaEventRecord(h2d_tail, h2d), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(compute, h2d_tail, 0), "cudaStreamWaitEvent");
    h2d_pending = false;
  }
  if (d2h_pending) {
    check_cuda(cudaEventRecord(d2h_tail, d2h), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(compute, d2h_tail, 0), "cudaStreamWaitEvent");
    d2h_pending = false;
  }
  ++compute_epoch;  // the caller is about to add work: copy streams must wait again
  return compute;
}

cudaStream_t CudaBackend::Impl::copy_stream(bool to_device) {
  if (capturing) throw Error(Errc::internal, "cuda: a copy was enqueued while a graph was being captured");
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  // A copy in one direction after copies in the other: join those first, so
  // the compute stream's tail covers every earlier piece of work.
  if (to_device ? d2h_pending : h2d_pending) compute_stream();
  cudaStream_t stream = to_device ? h2d : d2h;
  uint64_t& seen = to_device ? h2d_seen_epoch : d2h_seen_epoch;
  if (seen != compute_epoch) {
    check_cuda(cudaEventRecord(compute_tail, compute), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream, compute_tail, 0), "cudaStreamWaitEvent");
    seen = compute_epoch;
  }
  (to_device ? h2d_pending : d2h_pending) = true;
  return stream;
}

// ---- the backend -------------------------------------------------------------

CudaBackend::CudaBackend(int index) : info_(require_device(index)), impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.device = index;
  check_cuda(cudaSetDevice(index), "cudaSetDevice");
  check_cuda(cudaStreamCreateWithFlags(&s.compute, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  check_cuda(cudaStreamCreateWithFlags(&s.h2d, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  check_cuda(cudaStreamCreateWithFlags(&s.d2h, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  for (cudaEvent_t* e : {&s.compute_tail, &s.h2d_tail, &s.d2h_tail})
    check_cuda(cudaEventCreateWithFlags(e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  check_cublas(cublasLtCreate(&s.lt), "cublasLtCreate");
  s.allocator = std::make_shared<CachingAllocator>(index);
  s.gemm_workspace_bytes = kGemmWorkspaceBytes;
  check_cuda(cudaMalloc(&s.gemm_workspace, s.gemm_workspace_bytes), "cudaMalloc (GEMM workspace)");
  s.reduce_workspace_bytes = kReduceWorkspaceBytes;
  check_cuda(cudaMalloc(&s.reduce_workspace, s.reduce_workspace_bytes), "cudaMalloc (reduction workspace)");
  s.gemm_fallbacks = std::make_unique<GemmFallbackCounter>();
  s.convert_workspace_bytes = kConvertWorkspaceBytes;
  check_cuda(cudaMalloc(&s.convert_workspace, s.convert_workspace_bytes), "cudaMalloc (16-bit dy workspace)");
  ops_ = make_cuda_ops(*this);
}

CudaBackend::~CudaBackend() {
  drain();
  impl_->timer.reset();
  ops_.reset();  // its GEMM plans use the cuBLASLt handle the Impl destroys
}

// Also runs when the constructor throws half way (the members made so far).
CudaBackend::Impl::~Impl() {
  if (gemm_workspace) cudaFree(gemm_workspace);
  if (reduce_workspace) cudaFree(reduce_workspace);
  if (convert_workspace) cudaFree(convert_workspace);
  if (lt) cublasLtDestroy(lt);
  for (cudaEvent_t e : {compute_tail, h2d_tail, d2h_tail})
    if (e) cudaEventDestroy(e);
  for (cudaStream_t st : {compute, h2d, d2h})
    if (st) cudaStreamDestroy(st);
  // The allocator goes with the last buffer that holds it.
}

std::string CudaBackend::name() const { return "cuda:" + std::to_string(info_.index); }

const Ops& CudaBackend::ops() const { return *ops_; }

std::unique_ptr<Buffer> CudaBackend::allocate(size_t bytes) {
  return std::make_unique<DeviceBuffer>(impl_->allocator, bytes);
}

std::unique_ptr<Buffer> CudaBackend::allocate_host(size_t bytes) { return std::make_unique<PinnedBuffer>(bytes); }

void CudaBackend::copy_to_device(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, impl_->copy_stream(true)),
             "cudaMemcpyAsync (host to device)");
}

void CudaBackend::copy_to_host(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, impl_->copy_stream(false)),
             "cudaMemcpyAsync (device to host)");
}

std::shared_ptr<Event> CudaBackend::record_event() {
  // An event recorded into a capture becomes a graph node: waiting on it
  // later would fail. Nothing the host can wait for exists inside a graph.
  if (impl_->capturing) throw Error(Errc::internal, "cuda: record_event while a graph is being captured");
  auto e = std::make_shared<CudaEvent>();
  check_cuda(cudaEventRecord(e->event, impl_->compute_stream()), "cudaEventRecord");
  return e;
}

bool CudaBackend::event_done(const Event& event) {
  const cudaError_t status = cudaEventQuery(static_cast<const CudaEvent&>(event).event);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is an answer, not an error
    return false;
  }
  check_cuda(status, "cudaEventQuery");
  return true;
}

void CudaBackend::wait(const Event& event) {
  count_host_sync();
  check_cuda(cudaEventSynchronize(static_cast<const CudaEvent&>(event).event), "cudaEventSynchronize");
}

void CudaBackend::throttle(const Event& event) {
  if (!event_done(event)) count_throttle_wait();
  check_cuda(cudaEventSynchronize(static_cast<const CudaEvent&>(event).event), "cudaEventSynchronize");
}

void CudaBackend::drain() noexcept {
  Impl& s = *impl_;
  for (cudaStream_t st : {s.h2d, s.d2h, s.compute})
    if (st) cudaStreamSynchronize(st);
}

void CudaBackend::begin_capture() {
  Impl& s = *impl_;
  if (s.capturing) throw Error(Errc::internal, "cuda: graph capture already running");
  // Thread-local mode: other threads' CUDA calls (the allocator, event
  // queries from the writer) are not pulled into the capture.
  check_cuda(cudaStreamBeginCapture(s.compute_stream(), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  s.capturing = true;
}

std::unique_ptr<Graph> CudaBackend::end_capture() {
  Impl& s = *impl_;
  if (!s.capturing) throw Error(Errc::internal, "cuda: end_capture without begin_capture");
  s.capturing = false;
  auto g = std::make_unique<CudaGraph>();
  // Ending the capture always takes the stream out of capture mode, even when
  // a call inside it failed and invalidated the recording (then this returns
  // cudaErrorStreamCaptureInvalidated and a null graph). check_cuda clears
  // the thread's last error on that path, so the eager run that follows does
  // not trip on it; g's destructor frees whatever was made.
  check_cuda(cudaStreamEndCapture(s.compute, &g->graph), "cudaStreamEndCapture");
  if (!g->graph) throw Error(Errc::internal, "cuda: cudaStreamEndCapture returned no graph");
  check_cuda(cudaGraphInstantiate(&g->exec, g->graph, 0), "cudaGraphInstantiate");
  return g;
}

void CudaBackend::replay(const Graph& graph) {
  const auto& g = static_cast<const CudaGraph&>(graph);
  Impl::Launch launch(*impl_, "graph");
  check_cuda(cudaGraphLaunch(g.exec, launch.stream), "cudaGraphLaunch");
}

void CudaBackend::set_trace(Trace* trace) {
  Impl& s = *impl_;
  drain();  // every timed op has run: the old timer records them all as it stops
  s.timer.reset();
  if (trace) s.timer = std::make_unique<OpTimer>(s.device, s.compute_stream(), trace);
}

double CudaBackend::busy_seconds() const { return impl_->timer ? impl_->timer->busy_seconds() : -1.0; }

std::vector<Backend::GemmFallback> CudaBackend::gemm_fallbacks() const { return impl_->gemm_fallbacks->entries(); }

size_t CudaBackend::bytes_in_use() const { return impl_->allocator->in_use(); }

Backend::MemoryReport CudaBackend::memory_report() const {
  const CachingAllocator& a = *impl_->allocator;
  MemoryReport r;
  r.allocated = a.in_use();
  r.reserved = r.allocated + a.cached();
  r.peak = a.peak();
  return r;
}
size_t CudaBackend::bytes_cached() const { return impl_->allocator->cached(); }

Backend::FreeMemory CudaBackend::free_memory() const {
  check_cuda(cudaSetDevice(impl_->device), "cudaSetDevice");
  size_t free_bytes = 0, total = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  const size_t cached = impl_->allocator->cached();
  return {free_bytes + cached, name() + " cudaMemGetInfo free " + std::to_string(free_bytes >> 20) + " MiB of " +
                                   std::to_string(total >> 20) + " MiB + " + std::to_string(cached >> 20) +
                                   " MiB cached by stoke"};
}

}  // namespace stoke::cuda
