// `stoke serve`: its flags (serve_option_table(): the common ones it takes,
// and the server's own) and its run.
#pragma once

#include <memory>

#include "apps/stoke/commands.h"

namespace stoke::cli {

std::unique_ptr<Command> make_serve_command();

}  // namespace stoke::cli
