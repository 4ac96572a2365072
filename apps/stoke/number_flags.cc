#include "apps/stoke/number_flags.h"

#include "jobs/option_table.h"

namespace stoke::cli {

// One parser for numbers: the option tables' (jobs/option_table.h); here its
// refusal becomes the CLI parser's one-line error.

std::string range_text(const IntRange& r) { return int_range_text(r.lo, r.hi); }

std::string range_text(const RealRange& r) { return real_range_text(r.lo, r.hi, r.lo_open, r.hi_open); }

int64_t parse_int_flag(const std::string& flag, const std::string& text, const IntRange& range) {
  try {
    return parse_int_option(flag, text, range.lo, range.hi, range.why);
  } catch (const Error& e) {
    throw CLI::ValidationError(e.what());
  }
}

double parse_real_flag(const std::string& flag, const std::string& text, const RealRange& range) {
  try {
    return parse_real_option(flag, text, range.lo, range.hi, range.lo_open, range.hi_open);
  } catch (const Error& e) {
    throw CLI::ValidationError(e.what());
  }
}

CLI::Option* add_real(CLI::App* cmd, const std::string& flag, double& target, RealRange range,
                      const std::string& help, bool show_default) {
  CLI::Option* opt = cmd->add_option_function<std::string>(
      flag, [&target, flag, range](const std::string& text) { target = parse_real_flag(flag, text, range); },
      help + " (" + range_text(range) + ")");
  opt->type_name("NUMBER");
  if (show_default) opt->default_str(number_text(target));
  return opt;
}

}  // namespace stoke::cli
