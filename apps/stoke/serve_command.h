// `stoke serve`: its flags (the common ones a model job takes, and the
// server's own) and its run.
#pragma once

#include <memory>

#include "apps/stoke/commands.h"

namespace stoke::cli {

std::unique_ptr<Command> make_serve_command();

}  // namespace stoke::cli
