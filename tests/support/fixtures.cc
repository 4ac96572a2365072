#include "support/fixtures.h"

#include <cstdlib>
#include <unistd.h>

namespace stoke::test {

std::filesystem::path fixtures_dir() {
  if (const char* env = std::getenv("STOKE_FIXTURES"); env && *env) return env;
  return STOKE_FIXTURES_DIR;
}

std::filesystem::path fixture(const std::string& relative) { return fixtures_dir() / relative; }

std::filesystem::path scratch_dir(const std::string& name) {
  // Per process, so ctest running tests in parallel never shares a folder.
  auto dir = std::filesystem::temp_directory_path() /
             ("stoke-test-" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::filesystem::path stoke_binary() {
  if (const char* env = std::getenv("STOKE_BIN"); env && *env) return env;
  return std::filesystem::path(STOKE_BINARY_DIR) / "apps" / "stoke" / "stoke";
}

}  // namespace stoke::test
