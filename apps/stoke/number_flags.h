// Numeric flags, one way for every command (RELIABILITY 16): the text is read
// as a signed number — so "-2" is minus two, never 2^64 - 2 as an unsigned
// parse would make it — and must lie in the flag's range, else one line names
// flag, value and range: "--num-shards -2: expected 1 to 1000000". The range
// is added to the flag's help, so `--help` shows what is accepted. The same
// callback runs for values from `--config FILE`.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace stoke::cli {

struct IntRange {
  IntRange(int64_t lo_, int64_t hi_, std::string why_ = "") : lo(lo_), hi(hi_), why(std::move(why_)) {}
  int64_t lo, hi;
  std::string why;  // appended to the error when not empty, e.g. the cap's reason
};

struct RealRange {
  RealRange(double lo_, double hi_, bool lo_open_ = false, bool hi_open_ = false)
      : lo(lo_), hi(hi_), lo_open(lo_open_), hi_open(hi_open_) {}
  double lo, hi;
  bool lo_open;  // the value must be above lo, not equal to it (a learning rate of 0 trains nothing)
  bool hi_open;  // the value must be below hi (a dropout probability of 1 drops everything)
};

// Throw CLI::ValidationError with the one-line message.
int64_t parse_int_flag(const std::string& flag, const std::string& text, const IntRange& range);
double parse_real_flag(const std::string& flag, const std::string& text, const RealRange& range);
std::string range_text(const IntRange& range);
std::string range_text(const RealRange& range);

// target keeps its value unless the flag is given; its value is shown as the
// default (show_default false: a default that says "unset" in words instead).
template <class T>
CLI::Option* add_int(CLI::App* cmd, const std::string& flag, T& target, IntRange range, const std::string& help,
                     bool show_default = true) {
  const std::string accepted = range_text(range);
  CLI::Option* opt = cmd->add_option_function<std::string>(
      flag, [&target, flag, range](const std::string& text) {
        target = static_cast<T>(parse_int_flag(flag, text, range));
      },
      help + " (" + accepted + ")");
  opt->type_name("INT");
  if (show_default) opt->default_str(std::to_string(target));
  return opt;
}

template <class T>
CLI::Option* add_int(CLI::App* cmd, const std::string& flag, std::optional<T>& target, IntRange range,
                     const std::string& help) {
  CLI::Option* opt = cmd->add_option_function<std::string>(
      flag, [&target, flag, range](const std::string& text) {
        target = static_cast<T>(parse_int_flag(flag, text, range));
      },
      help + " (" + range_text(range) + ")");
  opt->type_name("INT");
  return opt;
}

CLI::Option* add_real(CLI::App* cmd, const std::string& flag, double& target, RealRange range,
                      const std::string& help, bool show_default = true);

}  // namespace stoke::cli
