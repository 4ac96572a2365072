// `stoke serve`: the model opened, the HTTP server listening, a warm-up
// forward pass (then /health answers 200), and on SIGTERM or SIGINT a drain:
// no new connections, in-flight requests answered within --drain-timeout,
// a summary line, exit status 0.
#pragma once

#include "serve/serve_options.h"

namespace stoke {

// Throws Error with one clear line when the server cannot start (a bad flag,
// a model it cannot serve, an address in use). Returns the exit status.
int run_serve(const ServeOptions& options);

}  // namespace stoke
