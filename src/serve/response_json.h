// Writing response bodies: floats in their shortest round-trip form
// (std::to_chars), float arrays, JSON strings, base64 of little-endian f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace stoke::serve {

// The shortest text that reads back as the same float; non-finite as null.
void append_float(std::string& out, float v);
void append_double(std::string& out, double v);
// [v0,v1,...]
void append_float_array(std::string& out, const float* v, size_t n);
// A JSON string literal (s must be valid UTF-8: request texts are, simdjson checked them).
void append_string(std::string& out, std::string_view s);
// The bytes of n little-endian float32 values, base64-encoded (RFC 4648, padded).
void append_base64_floats(std::string& out, const float* v, size_t n);

}  // namespace stoke::serve
