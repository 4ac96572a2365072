#include "support/fixtures.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "core/file_util.h"

namespace stoke::test {

std::filesystem::path fixtures_dir() {
  if (const char* env = std::getenv("STOKE_FIXTURES"); env && *env) return env;
  return STOKE_FIXTURES_DIR;
}

std::filesystem::path fixture(const std::string& relative) { return fixtures_dir() / relative; }

std::filesystem::path source_dir() {
  if (const char* env = std::getenv("STOKE_SOURCE_DIR"); env && *env) return env;
  return STOKE_SOURCE_DIR;
}

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

RunResult run_command(const std::string& command) {
  const std::filesystem::path dir = scratch_dir("cli-run");
  const std::string cmd = command + " >" + (dir / "out").string() + " 2>" + (dir / "err").string();
  const int raw = std::system(cmd.c_str());
  RunResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  r.out = read_file(dir / "out");
  r.err = read_file(dir / "err");
  return r;
}

RunResult run_stoke(const std::string& args, const std::string& stdin_file, const std::string& env) {
  return run_command(env + " " + stoke_binary().string() + " " + args + " <" + stdin_file);
}

}  // namespace stoke::test
