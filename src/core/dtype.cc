#include "core/dtype.h"

namespace stoke {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
  bool is_float;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::f64, "F64", 8, true},   {DType::f32, "F32", 4, true},
    {DType::f16, "F16", 2, true},   {DType::bf16, "BF16", 2, true},
    {DType::i64, "I64", 8, false},  {DType::i32, "I32", 4, false},
    {DType::i16, "I16", 2, false},  {DType::i8, "I8", 1, false},
    {DType::u8, "U8", 1, false},    {DType::boolean, "BOOL", 1, false},
    {DType::u16, "U16", 2, false},  {DType::u32, "U32", 4, false},
    {DType::u64, "U64", 8, false},
};
const DTypeInfo& info(DType t) { return kDTypes[static_cast<size_t>(t)]; }
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }
bool dtype_is_float(DType t) { return info(t).is_float; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return d.type;
  return std::nullopt;
}

}  // namespace stoke
