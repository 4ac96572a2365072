// libFuzzer target for the restricted PyTorch checkpoint reader (zip +
// pickle + state dict). Any input must either be refused with a stoke::Error
// or give tensors whose bytes can all be read, each with numel x element size
// bytes, found again by name.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "io/torch_checkpoint.h"
#include "io/torch_zip.h"

namespace {

void check(std::span<const std::byte> input) {
  std::shared_ptr<stoke::TorchCheckpoint> c;
  try {
    c = stoke::TorchCheckpoint::from_bytes(input, "fuzz");
  } catch (const stoke::Error&) {
    return;
  }
  // Touch every byte of every view (ASan catches a view past the buffer).
  unsigned sum = 0;
  for (const auto& t : c->tensors()) {
    for (std::byte b : t.data) sum += static_cast<unsigned>(b);
    if (t.numel() * static_cast<int64_t>(stoke::dtype_size(t.dtype)) != static_cast<int64_t>(t.data.size()))
      std::abort();
    if (c->find(t.name) != &t) std::abort();
  }
  volatile unsigned sink = sum;
  (void)sink;
}

// Little-endian fields of the given widths, in order.
struct Field {
  uint64_t value;
  int bytes;
};
void put(std::vector<std::byte>& out, std::initializer_list<Field> fields) {
  for (Field f : fields)
    for (int i = 0; i < f.bytes; ++i) out.push_back(static_cast<std::byte>((f.value >> (8 * i)) & 0xFF));
}
void put(std::vector<std::byte>& out, const std::string& text) {
  for (char ch : text) out.push_back(static_cast<std::byte>(ch));
}

// A valid STORED zip (no zip64 records) holding `members`, CRCs right.
std::vector<std::byte> zip(const std::vector<std::pair<std::string, std::span<const std::byte>>>& members) {
  std::vector<std::byte> out, central;
  for (const auto& [name, data] : members) {
    const uint64_t offset = out.size(), n = data.size();
    const uint32_t crc = stoke::crc32_of(data);
    put(out, {{0x04034b50, 4}, {20, 2}, {0, 2}, {0, 2}, {0, 4}, {crc, 4}, {n, 4}, {n, 4}, {name.size(), 2}, {0, 2}});
    put(out, name);
    out.insert(out.end(), data.begin(), data.end());
    put(central, {{0x02014b50, 4}, {20, 2}, {20, 2}, {0, 2}, {0, 2}, {0, 4}, {crc, 4}, {n, 4}, {n, 4},
                  {name.size(), 2}, {0, 2}, {0, 2}, {0, 2}, {0, 2}, {0, 4}, {offset, 4}});
    put(central, name);
  }
  const uint64_t cd_offset = out.size(), count = members.size();
  out.insert(out.end(), central.begin(), central.end());
  put(out, {{0x06054b50, 4}, {0, 2}, {0, 2}, {count, 2}, {count, 2}, {central.size(), 4}, {cd_offset, 4}, {0, 2}});
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size);
  // 1. The input as a checkpoint file: the zip reader's checks.
  check(input);
  // 2. The input as data.pkl inside an intact archive with storages "0" to "3"
  // (16 to 128 bytes): the CRC passes, so mutations reach the unpickler and the
  // state dict's checks instead of stopping at the zip layer.
  static const std::vector<std::byte> storage(128, std::byte{0x3f});
  std::vector<std::pair<std::string, std::span<const std::byte>>> members{{"archive/data.pkl", input},
                                                                          {"archive/byteorder", {}}};
  static const char little[] = "little";
  members[1].second = std::span<const std::byte>(reinterpret_cast<const std::byte*>(little), 6);
  for (int k = 0; k < 4; ++k)
    members.emplace_back("archive/data/" + std::to_string(k), std::span(storage).first(16u << k));
  check(zip(members));
  return 0;
}
