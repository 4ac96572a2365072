// A device that runs out of memory on demand, for the out-of-memory paths
// (RELIABILITY 10) on the CPU: single allocations above a cap are refused
// with OutOfMemoryError, as a full GPU refuses them, and so is the n-th
// allocation when a test arms it. free_memory() reports the cap. Everything
// else is the wrapped backend's.
#pragma once

#include <string>

#include "backend/backend.h"

namespace stoke::test {

class CappedBackend final : public Backend {
 public:
  CappedBackend(Backend& inner, size_t cap) : inner_(inner), cap_(cap) {}
  // The n-th allocate() from now on (1: the next) is refused whatever its size.
  void refuse_allocation(long n) { refuse_in_ = n; }
  // A new cap from now on (a test lets the setup allocate, then tightens it).
  void set_cap(size_t cap) { cap_ = cap; }
  long refused() const { return refused_; }
  long allocations() const { return allocations_; }

  std::string name() const override { return inner_.name(); }
  bool device_is_host() const override { return inner_.device_is_host(); }
  std::unique_ptr<Buffer> allocate(size_t bytes) override {
    ++allocations_;
    if (bytes > cap_ || (refuse_in_ > 0 && --refuse_in_ == 0)) {
      ++refused_;
      throw OutOfMemoryError("test device: no room for " + std::to_string(bytes) + " bytes");
    }
    return inner_.allocate(bytes);
  }
  std::unique_ptr<Buffer> allocate_host(size_t bytes) override { return inner_.allocate_host(bytes); }
  void copy_to_device(void* d, const void* h, size_t n) override { inner_.copy_to_device(d, h, n); }
  void copy_to_host(void* h, const void* d, size_t n) override { inner_.copy_to_host(h, d, n); }
  std::shared_ptr<Event> record_event() override { return inner_.record_event(); }
  bool event_done(const Event& e) override { return inner_.event_done(e); }
  void wait(const Event& e) override {
    inner_.wait(e);
    count_host_sync();
  }
  void throttle(const Event& e) override { inner_.throttle(e); }
  void drain() noexcept override { inner_.drain(); }
  const Ops& ops() const override { return inner_.ops(); }
  FreeMemory free_memory() const override { return {cap_, "test device cap"}; }

 private:
  Backend& inner_;
  size_t cap_;
  long refuse_in_ = 0, refused_ = 0, allocations_ = 0;
};

}  // namespace stoke::test
