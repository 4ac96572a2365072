// Stopping on SIGTERM / SIGINT (docs/pipeline.md "Stopping and resuming"):
// the first signal asks the running job to stop — it stops reading, finishes
// the batches in flight, keeps everything complete and says how to go on —
// and a watchdog ends the process if that takes longer than the stop timeout;
// a second signal ends it at once. Either way the exit status is 128 + the
// signal's number, as a shell reports a job a signal ended (130 for SIGINT,
// 143 for SIGTERM), and the output folder is as a kill leaves it: resumable.
//
// Jobs poll the flag (a relaxed load, between batches or steps); nothing in a
// signal handler does more than store it and write one line.
#pragma once

#include <atomic>

namespace stoke {

// The flag the jobs read (EmbedOptions::cancel, TrainOptions::cancel, ...).
const std::atomic<bool>& stop_requested_flag();
inline bool stop_requested() { return stop_requested_flag().load(std::memory_order_relaxed); }
// The signal that asked (SIGTERM, SIGINT), 0 while none has.
int stop_signal();
// What the process exits with after a stop: 128 + the signal's number.
int stop_exit_status();

// Installs the handlers and starts the watchdog. `timeout_seconds`: how long
// the job may take to stop after the first signal before the process exits
// without it (--stop-timeout). Call once, before the job starts.
void install_stop_handlers(double timeout_seconds);

// Tests: asks for a stop as `signo` would, without a signal.
void request_stop_for_tests(int signo);

}  // namespace stoke
