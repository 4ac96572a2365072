// The stoke subcommands, one table: each registers its own flags and runs its
// own job. main() parses, resolves what every text-reading command shares
// (--config, --model, stdin), and runs the one given.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <vector>

#include "jobs/common_options.h"

namespace stoke::cli {

// A form of a command that reads texts (`embed`, `doctor embed`, ...): its
// parsed flags, its common options, and whether it reads --input.
struct TextCommand {
  CLI::App* cmd;
  CommonOptions* common;
  bool reads_input;
};

class Command {
 public:
  virtual ~Command() = default;
  // Adds the subcommand and its flags to `app` (bound to this object's
  // members, so a Command stays where it is once added).
  virtual void add_to(CLI::App& app) = 0;
  // Whether the user gave this subcommand.
  virtual bool parsed() const = 0;
  // Every text-reading form of this command (parsed or not).
  virtual std::vector<TextCommand> text_commands() { return {}; }
  // Runs the job and prints what it prints; the exit status. Errors throw.
  virtual int run() = 0;
  // Whether the job writes output and stops cleanly on SIGTERM/SIGINT
  // (core/stop_request.h): main installs the handlers for it. serve drains
  // on its own; the read-only commands just end.
  virtual bool stops_on_signal() const { return false; }
};

// tokenize, embed, classify, train, doctor, tune, inspect, verify, serve: in --help order.
std::vector<std::unique_ptr<Command>> make_commands();

}  // namespace stoke::cli
