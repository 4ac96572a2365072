#include "core/crash_point.h"

#include "core/error.h"

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

Target parse(const char* variable) {
    Target r;
    const char* spec = std::getenv(variable);
    if (!spec) return r;
    const char* colon = std::strrchr(spec, ':');
    r.name = colon ? std::string(spec, colon) : std::string(spec);
    r.hits_left = colon ? std::strtol(colon + 1, nullptr, 10) : 1;
    r.armed = !r.name.empty() && r.hits_left > 0;
    return r;
}

Target& crash_target() {
  static Target t = parse("STOKE_CRASH_AT");
  return t;
}
Target& fail_target() {
  static Target t = parse("STOKE_FAIL_AT");
  return t;
}

Target& oom_target() {
  static Target t = parse("STOKE_OOM_AT");
  return t;
}

Target& stop_target() {
  static Target t = parse("STOKE_STOP_AT");
  return t;
}

Target& hang_target() {
  static Target t = parse("STOKE_HANG_AT");
  return t;
}

std::mutex mu;

}  // namespace

void crash_point(const char* name) {
  Target& crash = crash_target();
  Target& fail = fail_target();
  Target& stop = stop_target();
  Target& oom = oom_target();
  Target& hang = hang_target();
  if (!crash.armed && !fail.armed && !stop.armed && !oom.armed && !hang.armed) return;
  std::unique_lock lock(mu);
  if (hang.armed && hang.name == name && --hang.hits_left == 0) {
    hang.armed = false;
    lock.unlock();
    for (;;) ::pause();  // this thread only; the others (a watchdog) go on
  }
  // raise(), not kill(getpid()): a signal sent to the process is taken by
  // whichever thread the kernel picks, and this one could run on — commit a
  // shard, write a manifest — until that thread stops the group; sent to
  // this thread, it stops (or dies) before its next instruction here.
  if (stop.armed && stop.name == name && --stop.hits_left == 0) {
    stop.armed = false;
    ::raise(SIGSTOP);
  }
  if (crash.armed && crash.name == name && --crash.hits_left == 0) ::raise(SIGKILL);
  if (fail.armed && fail.name == name && --fail.hits_left == 0) {
    fail.armed = false;
    throw Error(Errc::io, std::string(name) + ": No space left on device (injected by STOKE_FAIL_AT)");
  }
  if (oom.armed && oom.name == name && --oom.hits_left == 0) {
    oom.armed = false;
    throw OutOfMemoryError(std::string(name) + ": the device is out of memory (injected by STOKE_OOM_AT)");
  }
}

}  // namespace stoke
