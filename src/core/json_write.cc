#include "core/json_write.h"

#include <charconv>

namespace stoke {

void json_append_string(std::string& out, std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  out.push_back('"');
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 15]);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

void json_append_ints(std::string& out, std::span<const int32_t> values) {
  out.push_back('[');
  char buf[16];
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ", ";
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, values[i]);
    out.append(buf, end);
  }
  out.push_back(']');
}

}  // namespace stoke
