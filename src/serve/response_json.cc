#include "serve/response_json.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "core/json_write.h"

namespace stoke::serve {

void append_float(std::string& out, float v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_double(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_float_array(std::string& out, const float* v, size_t n) {
  out.push_back('[');
  for (size_t i = 0; i < n; ++i) {
    if (i) out.push_back(',');
    append_float(out, v[i]);
  }
  out.push_back(']');
}

void append_string(std::string& out, std::string_view s) { json_append_string(out, s); }

void append_base64_floats(std::string& out, const float* v, size_t n) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const size_t bytes = n * 4;
  auto byte_at = [v](size_t i) {
    uint32_t bits;
    std::memcpy(&bits, v + i / 4, 4);  // little-endian: byte k of the value is bits >> 8k
    return static_cast<uint8_t>(bits >> (8 * (i % 4)));
  };
  out.reserve(out.size() + (bytes + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes; i += 3) {
    const uint32_t w = (uint32_t{byte_at(i)} << 16) | (uint32_t{byte_at(i + 1)} << 8) | byte_at(i + 2);
    out.push_back(kAlphabet[(w >> 18) & 63]);
    out.push_back(kAlphabet[(w >> 12) & 63]);
    out.push_back(kAlphabet[(w >> 6) & 63]);
    out.push_back(kAlphabet[w & 63]);
  }
  if (const size_t rest = bytes - i; rest > 0) {
    uint32_t w = uint32_t{byte_at(i)} << 16;
    if (rest == 2) w |= uint32_t{byte_at(i + 1)} << 8;
    out.push_back(kAlphabet[(w >> 18) & 63]);
    out.push_back(kAlphabet[(w >> 12) & 63]);
    out.push_back(rest == 2 ? kAlphabet[(w >> 6) & 63] : '=');
    out.push_back('=');
  }
}

}  // namespace stoke::serve
