#include "apps/stoke/parse_errors.h"

#include <cctype>
#include <vector>

#include "apps/stoke/flag_suggestions.h"

namespace stoke::cli {

namespace {

// "stoke tune embed": the names from the root down.
std::string command_path(const CLI::App* app) {
  std::string path = app->get_name();
  for (const CLI::App* p = app->get_parent(); p != nullptr; p = p->get_parent()) path = p->get_name() + " " + path;
  return path;
}

std::vector<const CLI::App*> subcommands_of(const CLI::App* app) {
  return app->get_subcommands([](const CLI::App*) { return true; });
}

// The last command the user named (`tune embed` in `stoke tune embed ...`).
const CLI::App* deepest_parsed(const CLI::App* app) {
  for (const CLI::App* sub : app->get_subcommands())
    if (sub->parsed()) return deepest_parsed(sub);
  return app;
}

// The command CLI11 found words it could not place in: the first from the
// root down, as it checks them.
const CLI::App* with_leftovers(const CLI::App* app) {
  if (app->remaining_size(false) > 0) return app;
  for (const CLI::App* sub : app->get_subcommands())
    if (const CLI::App* found = with_leftovers(sub)) return found;
  return nullptr;
}

CommandFlags flags_of(const CLI::App* app) {
  CommandFlags c;
  c.command = command_path(app);
  for (const CLI::Option* opt : app->get_options()) {
    for (const std::string& n : opt->get_lnames()) c.flags.push_back("--" + n);
    for (const std::string& n : opt->get_snames()) c.flags.push_back("-" + n);
  }
  return c;
}

void every_command(const CLI::App* app, std::vector<CommandFlags>& out) {
  out.push_back(flags_of(app));
  for (const CLI::App* sub : subcommands_of(app)) every_command(sub, out);
}

std::vector<std::string> subcommand_names(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : subcommands_of(app)) names.push_back(sub->get_name());
  return names;
}

bool takes_arguments(const CLI::App* app) {
  return !app->get_options([](const CLI::Option* o) { return o->get_positional(); }).empty();
}

// "-3" is a value (a negative number), not a flag.
bool looks_like_flag(const std::string& word) {
  return word.size() > 1 && word[0] == '-' && !std::isdigit(static_cast<unsigned char>(word[1])) && word[1] != '.';
}

std::string line(const std::string& text) { return "stoke: error: " + text; }

// Words left over: the first flag among them (a value after it is its own:
// `--batch-size 32`), else the first word.
std::string leftovers_line(const CLI::App& root, const CLI::App* app) {
  const std::vector<std::string> words = app->remaining(false);
  for (const std::string& w : words)
    if (looks_like_flag(w)) {
      std::vector<CommandFlags> all;
      every_command(&root, all);
      return line(unknown_flag_message(flags_of(app), w, all));
    }
  const std::string word = words.empty() ? "" : words.front();
  if (!subcommands_of(app).empty() && !takes_arguments(app))
    return line(unknown_command_message(command_path(app), subcommand_names(app), word));
  return line(unexpected_argument_message(command_path(app), word));
}

// "--model: 1 required TEXT missing" -> "--model needs a value".
std::string missing_value_line(const std::string& what) {
  const size_t colon = what.find(": ");
  if (what.rfind("-", 0) != 0 || colon == std::string::npos || what.find(" missing", colon) == std::string::npos)
    return line(what);
  const std::string flag = what.substr(0, colon);
  std::string kind;
  if (what.find(" INT ") != std::string::npos) kind = " (a whole number)";
  if (what.find(" NUMBER ") != std::string::npos || what.find(" FLOAT ") != std::string::npos) kind = " (a number)";
  return line(flag + " needs a value" + kind);
}

// "path is required" -> "`stoke inspect` needs its path: a model folder, ...".
std::string required_line(const CLI::App& root, const std::string& what) {
  const CLI::App* app = deepest_parsed(&root);
  if (what.rfind("A subcommand", 0) == 0 || what.rfind("Requires at least", 0) == 0) {
    std::string word;
    for (const std::string& w : app->remaining(false))
      if (!looks_like_flag(w)) {
        word = w;
        break;
      }
    return line(unknown_command_message(command_path(app), subcommand_names(app), word));
  }
  const std::string suffix = " is required";
  if (what.size() > suffix.size() && what.compare(what.size() - suffix.size(), suffix.size(), suffix) == 0) {
    const std::string name = what.substr(0, what.size() - suffix.size());
    std::string text = "`" + command_path(app) + "` needs its " + name + " argument";
    if (const CLI::Option* opt = app->get_option_no_throw(name); opt != nullptr && !opt->get_description().empty()) {
      std::string about = opt->get_description();
      about[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(about[0])));
      text += ": " + about;
    }
    return line(text);
  }
  return line(what);
}

}  // namespace

std::string parse_error_line(const CLI::App& root, const CLI::ParseError& e) {
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    if (const CLI::App* app = with_leftovers(&root)) return leftovers_line(root, app);
    return line(e.what());
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) return missing_value_line(e.what());
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) return required_line(root, e.what());
  // A value refused by its flag's own check (number_flags.h, option_flags.h)
  // already names flag, value and what is accepted: one error line like any
  // other, whether the value was checked as the flags were read or later by
  // the job.
  return line(e.what());
}

}  // namespace stoke::cli
