#include "core/crash_point.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace stoke {

namespace {

struct Target {
  std::string name;
  long hits_left = 0;
  bool armed = false;
};

Target& target() {
  static Target t = [] {
    Target r;
    const char* spec = std::getenv("STOKE_CRASH_AT");
    if (!spec) return r;
    const char* colon = std::strrchr(spec, ':');
    r.name = colon ? std::string(spec, colon) : std::string(spec);
    r.hits_left = colon ? std::strtol(colon + 1, nullptr, 10) : 1;
    r.armed = !r.name.empty() && r.hits_left > 0;
    return r;
  }();
  return t;
}

std::mutex mu;

}  // namespace

void crash_point(const char* name) {
  Target& t = target();
  if (!t.armed) return;
  std::lock_guard lock(mu);
  if (t.name != name) return;
  if (--t.hits_left == 0) ::kill(::getpid(), SIGKILL);
}

}  // namespace stoke
