// Element types of stored tensors (safetensors) and of compute (f32/bf16/f16).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace stoke {

enum class DType : uint8_t { f64, f32, f16, bf16, i64, i32, i16, i8, u8, boolean, u16, u32, u64 };

size_t dtype_size(DType t);
// The safetensors spelling: "F32", "BF16", "BOOL", ...
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view safetensors_name);
bool dtype_is_float(DType t);

}  // namespace stoke
