// What to say when the command line names a flag or a command stoke does not
// have. People arrive with the names of the tools they know — sentence-
// transformers (`--batch-size`, `--max-seq-length`), TEI (`--model-id`,
// `--hostname`, `--max-batch-tokens`), the Hugging Face Trainer
// (`--output-dir`, `--learning-rate`), British spelling (`--normalise`),
// underscores for dashes — and the parser's "The following arguments were
// not expected: 32 --batch-size" helps none of them. These functions turn the
// unknown name into the flag to use instead, chosen only among the flags the
// command really has.
//
// Pure functions of their arguments (the command's flags come from the
// parser: parse_errors.cc), so every message is tested without the binary
// (tests/unit/test_flag_suggestions.cc).
#pragma once

#include <string>
#include <vector>

namespace stoke::cli {

// One command as the parser knows it.
struct CommandFlags {
  std::string command;             // "stoke tune embed"
  std::vector<std::string> flags;  // every name of every option, with its dashes: "--batch-tokens", "-h"
};

// The line (after "stoke: error: ") for `token`, a flag `command` does not
// take: "unknown flag --batch-size for `stoke embed`: use --max-batch-size
// (sequences per batch) or --batch-tokens (a token budget per batch)". In
// order: the same flag spelled the command's way (dashes, lower case); what
// the name means in the tools it comes from, among the command's flags; a
// flag of the command's own within a small edit distance or one the name
// begins; the other commands that have it (`others`: every command); else
// where the command's flags are listed. `token` may carry "=value".
std::string unknown_flag_message(const CommandFlags& command, const std::string& token,
                                 const std::vector<CommandFlags>& others = {});

// The line for a word where `command` expects one of its subcommands
// ("unknown command \"embedd\" for `stoke`: did you mean `stoke embed`?"),
// or, with an empty `token`, for no subcommand at all.
std::string unknown_command_message(const std::string& command, const std::vector<std::string>& subcommands,
                                    const std::string& token);

// The line for a word `command` has no place for ("foo" in `stoke embed foo`).
std::string unexpected_argument_message(const std::string& command, const std::string& token);

// The names among `names` that `typed` is most likely a slip of: those it
// begins, when it stops inside a word ("--dim" -> "--dimensions"), else
// those at the smallest edit distance within a limit that grows with the
// name's length (transposed letters count one). At most three, in `names`'
// order; none when nothing is close.
std::vector<std::string> close_names(const std::string& typed, const std::vector<std::string>& names);

}  // namespace stoke::cli
