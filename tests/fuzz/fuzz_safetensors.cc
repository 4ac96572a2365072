// libFuzzer target for the safetensors reader. Any input must either be
// refused with a stoke::Error or give tensors whose bytes can all be read; an
// accepted file must survive a write / read round trip unchanged.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "io/safetensors.h"

namespace {

void check(std::span<const std::byte> input) {
  std::shared_ptr<stoke::SafetensorsFile> f;
  try {
    f = stoke::SafetensorsFile::from_bytes(input, "fuzz");
  } catch (const stoke::Error&) {
    return;
  }
  // Touch every byte of every view (ASan catches a view past the buffer).
  unsigned sum = 0;
  std::vector<stoke::TensorToWrite> again;
  for (const auto& t : f->tensors()) {
    for (std::byte b : t.data) sum += static_cast<unsigned>(b);
    if (t.numel() * static_cast<int64_t>(stoke::dtype_size(t.dtype)) !=
        static_cast<int64_t>(t.data.size()))
      std::abort();
    if (f->find(t.name) != &t) std::abort();
    again.push_back({t.name, t.dtype, t.shape, t.data});
  }
  // What the reader accepts the writer must write, and that must read back equal.
  auto bytes = stoke::serialize_safetensors(again, f->metadata());
  auto g = stoke::SafetensorsFile::from_bytes(bytes, "fuzz-roundtrip");
  if (g->metadata() != f->metadata() || g->tensors().size() != f->tensors().size()) std::abort();
  for (const auto& t : f->tensors()) {
    const auto* u = g->find(t.name);
    if (!u || u->dtype != t.dtype || u->shape != t.shape || !std::ranges::equal(u->data, t.data))
      std::abort();
  }
  volatile unsigned sink = sum;
  (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size);
  // 1. The input as a file, 8-byte length prefix and all.
  check(input);
  // 2. The input with a consistent prefix: its first two bytes say how much of
  // the rest is header, so mutations reach the JSON and offset checks without
  // having to keep an 8-byte length in step with the header they edit.
  if (size >= 2) {
    uint64_t n = std::min<uint64_t>(data[0] | (uint64_t{data[1]} << 8), size - 2);
    std::vector<std::byte> file(8 + size - 2);
    for (int i = 0; i < 8; ++i) file[i] = static_cast<std::byte>((n >> (8 * i)) & 0xFF);
    std::copy(input.begin() + 2, input.end(), file.begin() + 8);
    check(file);
  }
  return 0;
}
