#include "cpu/cpu_backend.h"

#include <omp.h>

#include <chrono>

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace stoke::cpu {

namespace {

// 64-byte aligned host memory: cache lines and AVX-512 vectors.
class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(size_t bytes) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    data_ = rounded ? std::aligned_alloc(64, rounded) : nullptr;
    if (rounded && !data_) throw OutOfMemoryError("cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
    bytes_ = bytes;
  }
  ~HostBuffer() override { std::free(data_); }
};

// An event is the number of work items enqueued before it.
class CpuEvent final : public Event {
 public:
  explicit CpuEvent(uint64_t seq) : seq(seq) {}
  const uint64_t seq;
};

// The op table: each op captures its views by value and runs on the executor.
class CpuOps final : public Ops {
 public:
  explicit CpuOps(CpuBackend& b) : b_(b), k_(b.kernels()) {}

  void linear(const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias,
              Activation act) const override {
    b_.enqueue("linear", [=, f = k_.linear] { f(out, a, w, bias, act); });
  }
  void embed_layernorm(const TensorView& out, const TensorView& ids, const TensorView& positions,
                       const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                       const TensorView& type, const TensorView& gamma, const TensorView& beta, float eps,
                       const TensorView& out_low) const override {
    b_.enqueue("embed_layernorm", [=, f = k_.embed_layernorm] {
      f(out, ids, positions, type_ids, word, pos, type, gamma, beta, eps, out_low);
    });
  }
  void residual_layernorm(const TensorView& out, const TensorView& x, const TensorView& residual,
                          const TensorView& gamma, const TensorView& beta, float eps,
                          const TensorView& out_low) const override {
    b_.enqueue("residual_layernorm", [=, f = k_.residual_layernorm] { f(out, x, residual, gamma, beta, eps, out_low); });
  }
  void bias_gelu(const TensorView& x, const TensorView& bias) const override {
    b_.enqueue("bias_gelu", [=, f = k_.bias_gelu] { f(x, bias); });
  }
  void attention(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                 int max_seqlen) const override {
    b_.enqueue("attention", [=, f = k_.attention] { f(out, qkv, cu_seqlens, heads, max_seqlen); });
  }
  void pool(const TensorView& out, const TensorView& h, const TensorView& cu_seqlens,
            PoolingMode mode) const override {
    b_.enqueue("pool", [=, f = k_.pool] { f(out, h, cu_seqlens, mode); });
  }
  void l2_normalize(const TensorView& x) const override {
    b_.enqueue("l2_normalize", [=, f = k_.l2_normalize] { f(x); });
  }
  void gather_rows(const TensorView& out, const TensorView& h, const TensorView& rows) const override {
    b_.enqueue("gather_rows", [=, f = k_.gather_rows] { f(out, h, rows); });
  }
  void slice_columns(const TensorView& out, const TensorView& in) const override {
    b_.enqueue("slice_columns", [=, f = k_.slice_columns] { f(out, in); });
  }
  void convert(const TensorView& out, const TensorView& in) const override {
    b_.enqueue("convert", [=, f = k_.convert] { f(out, in); });
  }

  // --- training: forward variants that keep what backward needs, and backward ops
  void linear_backward(const TensorView& da, const TensorView& dw, const TensorView& db, const TensorView& dy,
                       const TensorView& a, const TensorView& w) const override {
    b_.enqueue("linear_backward", [=, f = k_.linear_backward] { f(da, dw, db, dy, a, w); });
  }
  void residual_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                                const TensorView& x, const TensorView& residual, const TensorView& gamma,
                                const TensorView& beta, float eps) const override {
    b_.enqueue("residual_layernorm_train", [=, f = k_.residual_layernorm_train] { f(out, mean, rstd, x, residual, gamma, beta, eps); });
  }
  void layernorm_backward(const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta,
                          const TensorView& dy, const TensorView& x, const TensorView& residual,
                          const TensorView& mean, const TensorView& rstd, const TensorView& gamma) const override {
    b_.enqueue("layernorm_backward", [=, f = k_.layernorm_backward] { f(dx, dgamma, dbeta, dy, x, residual, mean, rstd, gamma); });
  }
  void embed_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                             const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
                             const TensorView& word, const TensorView& pos, const TensorView& type,
                             const TensorView& gamma, const TensorView& beta, float eps) const override {
    b_.enqueue("embed_layernorm_train", [=, f = k_.embed_layernorm_train] {
      f(out, mean, rstd, ids, positions, type_ids, word, pos, type, gamma, beta, eps);
    });
  }
  void embed_layernorm_backward(const TensorView& dword, const TensorView& dpos, const TensorView& dtype,
                                const TensorView& dgamma, const TensorView& dbeta, const TensorView& dy,
                                const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
                                const TensorView& word, const TensorView& pos, const TensorView& type,
                                const TensorView& mean, const TensorView& rstd, const TensorView& gamma) const override {
    b_.enqueue("embed_layernorm_backward", [=, f = k_.embed_layernorm_backward] {
      f(dword, dpos, dtype, dgamma, dbeta, dy, ids, positions, type_ids, word, pos, type, mean, rstd, gamma);
    });
  }
  void bias_gelu_train(const TensorView& x, const TensorView& pre, const TensorView& bias) const override {
    b_.enqueue("bias_gelu_train", [=, f = k_.bias_gelu_train] { f(x, pre, bias); });
  }
  void bias_gelu_backward(const TensorView& dx, const TensorView& dbias, const TensorView& dy,
                          const TensorView& pre) const override {
    b_.enqueue("bias_gelu_backward", [=, f = k_.bias_gelu_backward] { f(dx, dbias, dy, pre); });
  }
  void tanh_backward(const TensorView& dx, const TensorView& dy, const TensorView& y) const override {
    b_.enqueue("tanh_backward", [=, f = k_.tanh_backward] { f(dx, dy, y); });
  }
  void attention_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                       const TensorView& cu_seqlens, int heads, int max_seqlen,
                       const AttentionDropout& dropout) const override {
    b_.enqueue("attention_train", [=, f = k_.attention_train] { f(out, lse, qkv, cu_seqlens, heads, max_seqlen, dropout); });
  }
  void attention_backward(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv,
                          const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens, int heads,
                          int max_seqlen, const AttentionDropout& dropout) const override {
    b_.enqueue("attention_backward", [=, f = k_.attention_backward] {
      f(dqkv, dout, qkv, out, lse, cu_seqlens, heads, max_seqlen, dropout);
    });
  }
  void add(const TensorView& y, const TensorView& x) const override {
    b_.enqueue("add", [=, f = k_.add] { f(y, x); });
  }
  void gather_rows_backward(const TensorView& dh, const TensorView& dout, const TensorView& rows) const override {
    b_.enqueue("gather_rows_backward", [=, f = k_.gather_rows_backward] { f(dh, dout, rows); });
  }
  void pool_backward(const TensorView& dh, const TensorView& dout, const TensorView& h,
                     const TensorView& cu_seqlens, PoolingMode mode) const override {
    b_.enqueue("pool_backward", [=, f = k_.pool_backward] { f(dh, dout, h, cu_seqlens, mode); });
  }
  // --- end of training ops
  // --- training: dropout, loss, optimizer
  void dropout(const TensorView& out, const TensorView& x, float p, uint64_t seed, uint32_t step,
               uint32_t tensor_id) const override {
    b_.enqueue("dropout", [=, f = k_.dropout] { f(out, x, p, seed, step, tensor_id); });
  }
  void dropout_backward(const TensorView& dx, const TensorView& dy, float p, uint64_t seed, uint32_t step,
                        uint32_t tensor_id) const override {
    b_.enqueue("dropout_backward", [=, f = k_.dropout_backward] { f(dx, dy, p, seed, step, tensor_id); });
  }
  void cross_entropy(const TensorView& dlogits, const TensorView& metrics, const TensorView& logits,
                     const TensorView& labels, float label_smoothing, float scale) const override {
    b_.enqueue("cross_entropy", [=, f = k_.cross_entropy] { f(dlogits, metrics, logits, labels, label_smoothing, scale); });
  }
  void mse_loss(const TensorView& dpred, const TensorView& metrics, const TensorView& pred, const TensorView& target,
                float scale) const override {
    b_.enqueue("mse_loss", [=, f = k_.mse_loss] { f(dpred, metrics, pred, target, scale); });
  }
  void sum_squares(const TensorView& out, const TensorView& x) const override {
    b_.enqueue("sum_squares", [=, f = k_.sum_squares] { f(out, x); });
  }
  void clip_scale(const TensorView& scale, const TensorView& sumsq, float max_norm) const override {
    b_.enqueue("clip_scale", [=, f = k_.clip_scale] { f(scale, sumsq, max_norm); });
  }
  void adamw(const TensorView& p, const TensorView& g, const TensorView& m, const TensorView& v,
             const TensorView& decay_ranges, const TensorView& grad_scale, const AdamWStep& hp) const override {
    b_.enqueue("adamw", [=, f = k_.adamw] { f(p, g, m, v, decay_ranges, grad_scale, hp); });
  }

 private:
  CpuBackend& b_;
  const Kernels& k_;
};

}  // namespace

CpuBackend::CpuBackend(const Kernels& kernels) : kernels_(kernels) {
  ops_ = std::make_unique<CpuOps>(*this);
  executor_ = std::thread([this] { run(); });
}

CpuBackend::~CpuBackend() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  executor_.join();
}

void CpuBackend::run() {
  for (;;) {
    Work work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop requested and all work done
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    bool skip;
    {
      std::lock_guard<std::mutex> lock(mu_);
      skip = error_ != nullptr;  // after a failure the stream only drains
    }
    if (!skip) {
      const auto t0 = std::chrono::steady_clock::now();
      try {
        work.fn();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
      const auto t1 = std::chrono::steady_clock::now();
      busy_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count(),
                         std::memory_order_relaxed);
      if (Trace* trace = trace_.load(std::memory_order_acquire)) trace->record(work.name, "device", t0, t1);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++completed_;
    }
    done_cv_.notify_all();
  }
}

void CpuBackend::set_host_load(int busy_host_threads) {
  // A user's OMP_NUM_THREADS is a ceiling we keep: the doctor's contention
  // advice names it, and TSan runs set 1 (libgomp is not instrumented).
  // Read on the calling thread, whose team size is still the environment's
  // (the executor's is the one set below).
  static const int user_ceiling = std::getenv("OMP_NUM_THREADS") != nullptr ? omp_get_max_threads() : 0;
  const int cores = omp_get_num_procs();
  int threads = std::max(1, cores - std::max(0, busy_host_threads));
  if (user_ceiling > 0) threads = std::min(threads, user_ceiling);
  enqueue("set threads", [threads] { omp_set_num_threads(threads); });
}

void CpuBackend::set_trace(Trace* trace) {
  drain();  // the work enqueued so far is recorded in the old trace (or none), never half in each
  trace_.store(trace, std::memory_order_release);
  if (trace) enqueue("name thread", [trace] { trace->name_thread("device"); });
}

void CpuBackend::enqueue(const char* name, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Work{name, std::move(fn)});
    ++enqueued_;
  }
  work_cv_.notify_one();
}

double CpuBackend::busy_seconds() const { return static_cast<double>(busy_ns_.load(std::memory_order_relaxed)) * 1e-9; }

std::unique_ptr<Buffer> CpuBackend::allocate(size_t bytes) { return std::make_unique<HostBuffer>(bytes); }
std::unique_ptr<Buffer> CpuBackend::allocate_host(size_t bytes) { return std::make_unique<HostBuffer>(bytes); }

void CpuBackend::copy_to_device(void* device_dst, const void* host_src, size_t bytes) {
  enqueue("copy to device", [=] { std::memcpy(device_dst, host_src, bytes); });
}

void CpuBackend::copy_to_host(void* host_dst, const void* device_src, size_t bytes) {
  enqueue("copy to host", [=] { std::memcpy(host_dst, device_src, bytes); });
}

std::shared_ptr<Event> CpuBackend::record_event() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::make_shared<CpuEvent>(enqueued_);
}

bool CpuBackend::event_done(const Event& event) {
  const auto& e = static_cast<const CpuEvent&>(event);
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ >= e.seq;
}

void CpuBackend::wait(const Event& event) {
  const auto& e = static_cast<const CpuEvent&>(event);
  count_host_sync();
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return completed_ >= e.seq; });
  if (error_) std::rethrow_exception(error_);
}

void CpuBackend::throttle(const Event& event) {
  const auto& e = static_cast<const CpuEvent&>(event);
  std::unique_lock<std::mutex> lock(mu_);
  if (completed_ < e.seq) count_throttle_wait();
  done_cv_.wait(lock, [&] { return completed_ >= e.seq; });
  if (error_) std::rethrow_exception(error_);
}

void CpuBackend::drain() noexcept {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = enqueued_;
  done_cv_.wait(lock, [&] { return completed_ >= target; });
}

}  // namespace stoke::cpu
