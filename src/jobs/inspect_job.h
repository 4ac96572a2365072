// `stoke inspect PATH`: what is in a model folder, a safetensors or .npy
// file, or an embed or train output folder, validated as strictly as the jobs
// that would read it. Any other path gets one line saying what it is.
#pragma once

#include <ostream>
#include <string>

namespace stoke {

// Prints a report to `out`; throws Error (the first problem found, one line)
// when PATH is invalid or of a kind inspect does not read.
void run_inspect(const std::string& path, std::ostream& out);

}  // namespace stoke
