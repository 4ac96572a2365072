// A test hook for crash safety: with STOKE_CRASH_AT="name:n" in the
// environment, the n-th time the process passes crash_point("name") it kills
// itself with SIGKILL — no destructors, no flushing, exactly like kill -9 at
// that instant. Tests use it to stop a job between any two steps of the
// commit protocol. STOKE_FAIL_AT="name:n" instead makes that passage throw
// Error(io) as a full disk would (the error path, with the process alive).
// STOKE_STOP_AT="name:n" stops the process there (SIGSTOP, as a debugger
// would), so a test can act while a job is mid-run, then SIGCONT it.
// STOKE_OOM_AT="name:n" makes that passage throw OutOfMemoryError, as a full
// device's allocation would (the recovery of RELIABILITY 10).
// STOKE_HANG_AT="name:n" blocks the thread that passes there for good, as a
// stuck device call would (the stop timeout of core/stop_request.h).
// Without the variables it costs one check of a static.
#pragma once

namespace stoke {

void crash_point(const char* name);

}  // namespace stoke
