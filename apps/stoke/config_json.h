// --config FILE: a JSON object of flag names to values ({"max-length": 64,
// "workers": 2}), as `stoke tune` writes it. Flags given on the command line
// win; a key that is not a flag of the command is an error. Keys may be
// written with or without the leading "--".
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace stoke::cli {

// Applies the file to the parsed command `cmd` (no-op when path is empty).
// Throws stoke::Error naming the file and key on a bad file or unknown key.
void apply_config_file(CLI::App* cmd, const std::string& path);

// `stoke embed --output DIR --resume` (and `doctor embed`): the settings the
// manifest in DIR recorded (its "options", a --config object) for every flag
// not given on the command line. No-op without --resume, or when DIR holds
// no stoke-embeddings manifest with options.
void apply_resume_manifest(CLI::App* cmd);

}  // namespace stoke::cli
