// How much CPU the rest of the machine took while a run went: the evidence
// behind "other processes are taking this machine's cores". Two readings,
// one before and one after; the difference of the machine's busy time
// (/proc/stat) and this process's own CPU time (getrusage) is what every
// other process used.
//
// Linux only; where /proc/stat cannot be read, other_cores() is -1 (unknown),
// never an error. Resolution is the kernel's clock tick (usually 10 ms).
#pragma once

#include <chrono>

namespace stoke {

struct MachineLoadReading {
  double machine_busy_seconds = -1;  // all CPUs' non-idle time since boot; < 0: unknown
  double self_seconds = 0;           // this process's user + system time
  std::chrono::steady_clock::time_point when;
};

MachineLoadReading read_machine_load();

// Cores' worth of CPU that other processes used between two readings
// (0.5 = half a core on average); -1 when either reading is unknown.
double other_processes_cores(const MachineLoadReading& before, const MachineLoadReading& after);

}  // namespace stoke
