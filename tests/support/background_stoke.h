// The stoke binary run in the background, for tests that act while a job is
// mid-run: start it (with STOKE_STOP_AT it stops itself at a named point),
// wait until it has stopped, then SIGCONT or SIGKILL it and collect its exit.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "support/fixtures.h"

namespace stoke::test {

// Starts `stoke <args>` (split on spaces) with extra environment entries
// ("NAME=value"); stdin and stdout are /dev/null, stderr goes to err_file.
inline pid_t spawn_stoke(const std::string& args, const std::filesystem::path& err_file,
                         const std::vector<std::string>& env = {}) {
  std::vector<std::string> words;
  std::istringstream split(args);
  for (std::string w; split >> w;) words.push_back(w);
  const std::string binary = stoke_binary().string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (const std::string& e : env) ::putenv(::strdup(e.c_str()));
    const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(err, 2);
    std::vector<char*> argv{const_cast<char*>(binary.c_str())};
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits for the process to exit; its exit status (128 + signal when killed).
inline int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits until the process stops itself (STOKE_STOP_AT); false if it exited instead.
inline bool wait_stopped(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, WUNTRACED);
  return WIFSTOPPED(status);
}

}  // namespace stoke::test
