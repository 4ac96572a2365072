#include "io/torch_checkpoint_error.h"

#include <algorithm>

namespace stoke {

namespace {

constexpr size_t kMaxQuoted = 120;

Errc broad_code(TorchCheckpointErrc kind) {
  switch (kind) {
    case TorchCheckpointErrc::io: return Errc::io;
    case TorchCheckpointErrc::refused_global:
    case TorchCheckpointErrc::refused_call:
    case TorchCheckpointErrc::pickle_refused_opcode: return Errc::refused;
    case TorchCheckpointErrc::legacy_format:
    case TorchCheckpointErrc::big_endian:
    case TorchCheckpointErrc::unknown_dtype:
    case TorchCheckpointErrc::not_contiguous: return Errc::unsupported;
    default: return Errc::format;
  }
}

}  // namespace

const char* torch_checkpoint_errc_name(TorchCheckpointErrc e) {
  switch (e) {
#define STOKE_TC_CASE(x) \
  case TorchCheckpointErrc::x: return #x;
    STOKE_TC_CASE(not_zip)
    STOKE_TC_CASE(legacy_format)
    STOKE_TC_CASE(zip_out_of_bounds)
    STOKE_TC_CASE(zip_malformed)
    STOKE_TC_CASE(zip_compressed)
    STOKE_TC_CASE(zip_bad_name)
    STOKE_TC_CASE(zip_duplicate_name)
    STOKE_TC_CASE(zip_overlap)
    STOKE_TC_CASE(zip_too_many_entries)
    STOKE_TC_CASE(crc_mismatch)
    STOKE_TC_CASE(bad_layout)
    STOKE_TC_CASE(missing_record)
    STOKE_TC_CASE(big_endian)
    STOKE_TC_CASE(pickle_malformed)
    STOKE_TC_CASE(pickle_refused_opcode)
    STOKE_TC_CASE(refused_global)
    STOKE_TC_CASE(refused_call)
    STOKE_TC_CASE(pickle_limit)
    STOKE_TC_CASE(not_state_dict)
    STOKE_TC_CASE(duplicate_name)
    STOKE_TC_CASE(unknown_dtype)
    STOKE_TC_CASE(bad_shape)
    STOKE_TC_CASE(not_contiguous)
    STOKE_TC_CASE(storage_out_of_range)
    STOKE_TC_CASE(storage_size_mismatch)
    STOKE_TC_CASE(storage_conflict)
    STOKE_TC_CASE(io)
#undef STOKE_TC_CASE
  }
  return "unknown";
}

TorchCheckpointError::TorchCheckpointError(TorchCheckpointErrc kind, const std::string& message)
    : Error(broad_code(kind), message), kind_(kind) {}

std::string torch_quote(std::string_view s) {
  size_t n = std::min(s.size(), kMaxQuoted);
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // whole UTF-8 sequences
  std::string out = "\"";
  for (char c : s.substr(0, n)) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7F) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  out += '"';
  if (n < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace stoke
