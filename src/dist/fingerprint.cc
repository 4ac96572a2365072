#include "dist/fingerprint.h"

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/sha256.h"

namespace stoke::dist {

namespace {

constexpr size_t kHashBytes = 8;  // per field: a mismatch by chance is 2^-64

void append_hash(std::vector<uint8_t>& out, const std::string& text) {
  const std::string hex = sha256_hex(text);
  for (size_t i = 0; i < kHashBytes; ++i) out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16)));
}

}  // namespace

void check_same_settings(Communicator& comm, const nlohmann::json& settings) {
  if (comm.size() <= 1) return;
  std::vector<std::string> fields;
  std::vector<uint8_t> mine;
  // Field names are sorted (nlohmann::json objects are), so ranks line up.
  for (const auto& [key, value] : settings.items()) {
    fields.push_back(key);
    append_hash(mine, key + "=" + value.dump());
  }
  // Different stoke builds may have different fields: compare counts first.
  const uint64_t count = fields.size();
  const std::vector<uint8_t> counts = comm.allgather(&count, sizeof count);
  for (int r = 1; r < comm.size(); ++r) {
    uint64_t c = 0;
    std::memcpy(&c, counts.data() + static_cast<size_t>(r) * sizeof c, sizeof c);
    if (c != count) {
      comm.fail_together();
      throw Error(Errc::refused, "rank " + std::to_string(r) + " has " + std::to_string(c) +
                                     " settings, rank 0 " + std::to_string(count) +
                                     ": every rank must run the same stoke build");
    }
  }
  const std::vector<uint8_t> all = comm.allgather(mine.data(), mine.size());
  const size_t stride = mine.size();
  for (size_t f = 0; f < fields.size(); ++f) {
    for (int r = 1; r < comm.size(); ++r) {
      if (std::memcmp(all.data() + static_cast<size_t>(r) * stride + f * kHashBytes, all.data() + f * kHashBytes,
                      kHashBytes) == 0)
        continue;
      comm.fail_together();
      throw Error(Errc::refused, "ranks were started differently: rank " + std::to_string(r) + "'s " + fields[f] +
                                     " differs from rank 0's (start every rank with the same flags and data files)");
    }
  }
}

}  // namespace stoke::dist
