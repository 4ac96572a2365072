#pragma once
namespace stoke {
const char* stoke_version();
}  // namespace stoke
