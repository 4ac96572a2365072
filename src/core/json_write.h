// Appending JSON values to a string, for outputs written per record (JSONL)
// where building a DOM per line would cost more than the work itself.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace stoke {

// Appends s as a JSON string literal (s must be valid UTF-8).
void json_append_string(std::string& out, std::string_view s);
void json_append_ints(std::string& out, std::span<const int32_t> values);

}  // namespace stoke
