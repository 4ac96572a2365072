// The OpenMP wait default (apps/stoke/openmp_defaults.cc) is in the
// environment a running stoke has, where libgomp reads it — a setenv() in
// .preinit_array was undone by libc's initialiser, so stoke ran on libgomp's
// throttled spin, which collapses under contention — and the user's own
// choice is left alone. Read from /proc/<pid>/environ of a stoke blocked on
// a FIFO input; no timing is asserted.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/fixtures.h"

namespace stoke {
namespace {

std::vector<std::string> environ_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::vector<std::string> out;
  std::string entry;
  while (std::getline(in, entry, '\0')) out.push_back(entry);
  return out;
}

// Starts `stoke tokenize` reading a FIFO (so it waits) under exactly `env`,
// returns its environment once it has exec'd into its final image, then lets
// it finish.
std::vector<std::string> running_environment(const std::string& name, std::vector<std::string> env) {
  const std::filesystem::path dir = test::scratch_dir("openmp-defaults-" + name);
  const std::string fifo = (dir / "in.fifo").string();
  ::unlink(fifo.c_str());
  if (::mkfifo(fifo.c_str(), 0600) != 0) return {"mkfifo failed"};
  const std::string bin = test::stoke_binary().string(), model = test::fixture("models/tiny-bert").string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv = {const_cast<char*>(bin.c_str()), const_cast<char*>("tokenize"),
                               const_cast<char*>("--model"), const_cast<char*>(model.c_str()),
                               const_cast<char*>("--input"), const_cast<char*>(fifo.c_str()),
                               const_cast<char*>("--quiet"), nullptr};
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::execve(bin.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  // Once stoke has opened the FIFO for reading (a non-blocking open for
  // writing then succeeds), it runs its final image: every exec is done.
  int writer = -1;
  for (int i = 0; i < 1500 && writer < 0; ++i) {
    writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (writer < 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::vector<std::string> seen = environ_of(pid);
  if (writer >= 0)
    ::close(writer);  // empty input: stoke finishes
  else
    ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return seen;
}

bool has(const std::vector<std::string>& env, const std::string& entry) {
  for (const auto& e : env)
    if (e == entry) return true;
  return false;
}
bool has_name(const std::vector<std::string>& env, const std::string& name) {
  for (const auto& e : env)
    if (e.rfind(name + "=", 0) == 0) return true;
  return false;
}

TEST(OpenmpDefaults, TheWaitDefaultIsInTheEnvironmentLibgompReads) {
  const auto env = running_environment("default", {"PATH=/usr/bin:/bin", "HOME=/tmp"});
  EXPECT_TRUE(has(env, "GOMP_SPINCOUNT=1000")) << "stoke runs without its OpenMP wait default";
  EXPECT_TRUE(has(env, "HOME=/tmp"));  // the rest is kept
  EXPECT_FALSE(has_name(env, "OMP_WAIT_POLICY"));
}

TEST(OpenmpDefaults, TheUsersChoiceWins) {
  auto env = running_environment("policy", {"PATH=/usr/bin:/bin", "OMP_WAIT_POLICY=active"});
  EXPECT_TRUE(has(env, "OMP_WAIT_POLICY=active"));
  EXPECT_FALSE(has_name(env, "GOMP_SPINCOUNT"));
  env = running_environment("spin", {"PATH=/usr/bin:/bin", "GOMP_SPINCOUNT=5000"});
  EXPECT_TRUE(has(env, "GOMP_SPINCOUNT=5000"));
  EXPECT_EQ(std::count_if(env.begin(), env.end(), [](const std::string& e) { return e.rfind("GOMP_SPINCOUNT=", 0) == 0; }), 1);
  env = running_environment("off", {"PATH=/usr/bin:/bin", "STOKE_OPENMP_DEFAULTS=off"});
  EXPECT_FALSE(has_name(env, "GOMP_SPINCOUNT"));
}

}  // namespace
}  // namespace stoke
