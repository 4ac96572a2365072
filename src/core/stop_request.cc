#include "core/stop_request.h"

#include <semaphore.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

namespace stoke {

namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
sem_t g_wake;  // posted by the handler: the watchdog starts its clock
char g_first_line[256];
size_t g_first_line_len = 0;
double g_timeout_seconds = 10;

// write(2) only: it is async-signal-safe, stdio is not.
void say(const char* text, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, text, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    text += w;
    n -= static_cast<size_t>(w);
  }
}

void on_signal(int signo) {
  const int saved_errno = errno;
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, signo)) {
    static const char kSecond[] = "stoke: second signal: exiting now; the output keeps what was already kept\n";
    say(kSecond, sizeof kSecond - 1);
    ::_exit(128 + expected);
  }
  g_stop.store(true, std::memory_order_relaxed);
  say(g_first_line, g_first_line_len);
  ::sem_post(&g_wake);
  errno = saved_errno;
}

// Ends the process when the job has not stopped in time. A job that
// stops exits the process first, and this thread with it.
void watchdog() {
  while (::sem_wait(&g_wake) != 0 && errno == EINTR) {
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(g_timeout_seconds));
  char line[200];
  const int n = std::snprintf(line, sizeof line,
                              "stoke: did not stop within --stop-timeout %g s: exiting now; the output keeps what "
                              "was already kept\n",
                              g_timeout_seconds);
  if (n > 0) say(line, static_cast<size_t>(n));
  ::_exit(stop_exit_status());
}

}  // namespace

const std::atomic<bool>& stop_requested_flag() { return g_stop; }
int stop_signal() { return g_signal.load(std::memory_order_relaxed); }
int stop_exit_status() {
  const int s = stop_signal();
  return 128 + (s == 0 ? SIGTERM : s);
}

void install_stop_handlers(double timeout_seconds) {
  static bool installed = false;
  if (installed) return;
  installed = true;
  g_timeout_seconds = timeout_seconds;
  const int n = std::snprintf(g_first_line, sizeof g_first_line,
                              "stoke: stopping: finishing the batches in flight (at most %g s), then keeping what is "
                              "done; a second signal exits at once\n",
                              timeout_seconds);
  g_first_line_len = n > 0 ? std::min(static_cast<size_t>(n), sizeof g_first_line - 1) : 0;
  ::sem_init(&g_wake, 0, 0);
  std::thread(watchdog).detach();
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads and writes in flight go on; the jobs poll the flag
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
}

void request_stop_for_tests(int signo) {
  int expected = 0;
  g_signal.compare_exchange_strong(expected, signo);
  g_stop.store(true, std::memory_order_relaxed);
}

}  // namespace stoke
