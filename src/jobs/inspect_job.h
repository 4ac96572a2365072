// `stoke inspect PATH`: what is in a model folder or a safetensors file,
// validated as strictly as the jobs that would load it.
#pragma once

#include <ostream>
#include <string>

namespace stoke {

// Prints a report to `out`; throws Error (the first problem found) when PATH is invalid.
void run_inspect(const std::string& path, std::ostream& out);

}  // namespace stoke
