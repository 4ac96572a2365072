// A parse error of the command line as the one line stoke prints for it,
// "stoke: error: ...", naming the command it happened in and what to type
// instead: an unknown flag gets the flag to use (flag_suggestions.h, over
// the flags the parser really has for that command), a missing value names
// its flag, a missing or misspelled command lists the commands.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace stoke::cli {

// `root`: the whole command line's parser, after parse() threw `e`. The line
// without its newline. Errors whose text is already ours (a number out of
// range: number_flags.h) keep it.
std::string parse_error_line(const CLI::App& root, const CLI::ParseError& e);

}  // namespace stoke::cli
