// The stoke command line: parses flags, calls one job function, and turns any
// error into one clear line on stderr and exit status 1. No job logic here:
// the subcommands are a table (commands.h), each with its flags and its job.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>

#include "apps/stoke/commands.h"
#include "apps/stoke/config_json.h"
#include "apps/stoke/job_reports.h"
#include "apps/stoke/parse_errors.h"
#include "core/error.h"
#include "core/stop_request.h"
#include "jobs/common_options.h"
#include "jobs/version.h"

namespace {

using stoke::cli::Command;

// Parses the command line; an exit status when parsing ends the run (help,
// version, a bad flag), nullopt when a command is to run.
std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line naming the command and what to type instead (parse_errors.h).
    std::fprintf(stderr, "%s\n", stoke::cli::parse_error_line(app, e).c_str());
    return 1;
  }
  return std::nullopt;
}

// What every text-reading form given shares, settled before its job runs:
// --config applied (command-line flags win), --model resolved once (a local
// folder or a hub id in the local cache), and stdin checked. Exit status 1
// with one line on a problem, else nullopt.
std::optional<int> prepare_text_command(const stoke::cli::TextCommand& c) {
  try {
    stoke::cli::apply_config_file(c.cmd, c.common->config);
    // embed --output DIR --resume: the rest from DIR's manifest.
    stoke::cli::apply_resume_manifest(c.cmd);
    // After --config, which may name the model.
    stoke::resolve_model_flag(*c.common);
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "stoke: --config %s: %s\n", c.common->config.c_str(), e.what());
    return 1;
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "stoke: error: %s\n", e.what());
    return 1;
  }
  // Without --input, texts come from stdin; a terminal there means the user
  // forgot --input, and waiting silently for typed texts would look hung.
  if (c.reads_input && c.cmd->count("--input") == 0 && ::isatty(STDIN_FILENO) == 1) {
    std::fprintf(stderr, "stoke: error: --input is required (or pipe texts to stdin)\n");
    return 1;
  }
  return std::nullopt;
}

// Runs the command; any error becomes one line and exit status 1.
int run_reporting_errors(Command& command) {
  try {
    return command.run();
  } catch (const stoke::ReportedError&) {
    // already said on stderr
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "stoke: error: %s\n", e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "stoke: error: out of memory\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stoke: internal error: %s\n", e.what());
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stoke: keeps the accelerator fed while BERT-family models embed, classify and fine-tune", "stoke"};
  app.option_defaults()->always_capture_default();
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("stoke ") + stoke::stoke_version());
  app.footer("Run `stoke <command> --help` for a command's flags and their defaults.");
  const std::vector<std::unique_ptr<Command>> commands = stoke::cli::make_commands();
  for (const auto& c : commands) c->add_to(app);

  if (const std::optional<int> status = parse(app, argc, argv)) return *status;
  stoke::cli::set_command_line(argc, argv);
  for (const auto& command : commands) {
    if (!command->parsed()) continue;
    double stop_timeout = stoke::CommonOptions{}.stop_timeout;
    for (const stoke::cli::TextCommand& form : command->text_commands()) {
      if (!form.cmd->parsed()) continue;
      if (const std::optional<int> status = prepare_text_command(form)) return *status;
      stop_timeout = form.common->stop_timeout;
    }
    if (command->stops_on_signal()) stoke::install_stop_handlers(stop_timeout);
    return run_reporting_errors(*command);
  }
  return 0;
}
