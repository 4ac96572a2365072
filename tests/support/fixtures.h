// Where the shared fixtures live for tests: $STOKE_FIXTURES, else the folder
// configured at build time (../shared/fixtures beside the repository).
#pragma once

#include <filesystem>
#include <string>

namespace stoke::test {

std::filesystem::path fixtures_dir();
std::filesystem::path fixture(const std::string& relative);
// The repository's root: $STOKE_SOURCE_DIR, else the checkout the tests were
// built from (a binary carried to another machine — scripts/gpu-check.sh —
// finds the repository's own goldens where that machine has the tree).
std::filesystem::path source_dir();
// A fresh, empty scratch folder for one test (removed at the start of the next run).
std::filesystem::path scratch_dir(const std::string& name);
// The built stoke binary (for CLI tests).
std::filesystem::path stoke_binary();

struct RunResult {
  int status = -1;  // exit status, or 128 + signal
  std::string out, err;
};
// Runs a shell command line (sh -c); stdout and stderr captured separately.
RunResult run_command(const std::string& command);
// Runs `env stoke <args>` through the shell; stdout and stderr captured separately.
RunResult run_stoke(const std::string& args, const std::string& stdin_file = "/dev/null", const std::string& env = "");

}  // namespace stoke::test
