#include "core/machine_load.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace stoke {

namespace {

// The aggregate "cpu" line of /proc/stat: user nice system idle iowait irq
// softirq steal (guest time is already inside user). Busy is all but idle
// and iowait. Ticks -> seconds; -1 when unreadable.
double machine_busy_seconds() {
  std::FILE* f = std::fopen("/proc/stat", "re");
  if (!f) return -1;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  const int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system, &idle, &iowait,
                            &irq, &softirq, &steal);
  std::fclose(f);
  if (n < 4) return -1;
  const double tick = 1.0 / static_cast<double>(std::max(::sysconf(_SC_CLK_TCK), 1L));
  return static_cast<double>(user + nice + system + irq + softirq + steal) * tick;
}

double seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); }

}  // namespace

MachineLoadReading read_machine_load() {
  MachineLoadReading r;
  r.when = std::chrono::steady_clock::now();
  r.machine_busy_seconds = machine_busy_seconds();
  rusage u{};
  if (::getrusage(RUSAGE_SELF, &u) == 0) r.self_seconds = seconds(u.ru_utime) + seconds(u.ru_stime);
  return r;
}

double other_processes_cores(const MachineLoadReading& before, const MachineLoadReading& after) {
  if (before.machine_busy_seconds < 0 || after.machine_busy_seconds < 0) return -1;
  const double wall = std::chrono::duration<double>(after.when - before.when).count();
  if (wall <= 0) return -1;
  const double others = (after.machine_busy_seconds - before.machine_busy_seconds) -
                        (after.self_seconds - before.self_seconds);
  return std::max(0.0, others) / wall;  // tick rounding can make it dip below 0
}

}  // namespace stoke
