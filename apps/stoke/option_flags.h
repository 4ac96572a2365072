// A job's option table (jobs/option_table.h) as CLI11 options: each entry
// once, its value parsed and checked by the table's own set() (a refused
// value becomes the parser's one-line error), its default shown from the
// table. `--config FILE` sets the same CLI options (config_json.h), so it
// goes through the same set().
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "jobs/common_options.h"
#include "jobs/option_table.h"

namespace stoke::cli {

template <class O>
CLI::Option* add_table_option(CLI::App* cmd, O& options, const Option<O>& e) {
  auto set = e.set;
  auto call = [set, &options](const std::string& text) {
    try {
      set(options, text);
    } catch (const Error& err) {
      throw CLI::ValidationError(err.what());  // the single-argument form: exactly this line
    }
  };
  std::string names = e.flag;
  for (const std::string& a : e.aliases) names += "," + a;
  std::string help = e.help;
  if (e.kind == OptionKind::integer || e.kind == OptionKind::real) help += " (" + e.accepted + ")";
  CLI::Option* opt = nullptr;
  switch (e.kind) {
    case OptionKind::flag:
      opt = cmd->add_flag_function(
          names, [call](int64_t count) { call(count > 0 ? "true" : "false"); }, help);
      break;
    case OptionKind::list:
      opt = cmd->add_option_function<std::vector<std::string>>(
                   names, [call](const std::vector<std::string>& values) {
                     for (const std::string& v : values) call(v);
                   },
                   help)
                ->expected(1, -1)
                ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      break;
    default:
      opt = cmd->add_option_function<std::string>(names, call, help);
      break;
  }
  if (!e.type_name.empty()) opt->type_name(e.type_name);
  if (e.show) {
    const std::string shown = e.show(options);
    if (!shown.empty()) opt->default_str(shown);
  }
  return opt;
}

}  // namespace stoke::cli
