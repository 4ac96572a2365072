// Shared by the fuzz targets: where the fixture models are ($STOKE_FIXTURES,
// else ../shared/fixtures from the working folder, as scripts/fuzz.sh runs).
#pragma once

#include <cstdlib>
#include <string>

namespace stoke::fuzz {

inline std::string fixtures_dir() {
  const char* env = std::getenv("STOKE_FIXTURES");
  return env && *env ? env : "../shared/fixtures";
}

}  // namespace stoke::fuzz
