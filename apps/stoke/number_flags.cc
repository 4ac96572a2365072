#include "apps/stoke/number_flags.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace stoke::cli {

namespace {

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

[[noreturn]] void refuse(const std::string& flag, const std::string& text, const std::string& expected) {
  // The single-argument form: the message is exactly this line.
  throw CLI::ValidationError(flag + " " + text + ": expected " + expected);
}

}  // namespace

std::string range_text(const IntRange& r) { return std::to_string(r.lo) + " to " + std::to_string(r.hi); }

std::string range_text(const RealRange& r) {
  if (!r.lo_open && !r.hi_open) return number_text(r.lo) + " to " + number_text(r.hi);
  return number_text(r.lo) + (r.lo_open ? " < value " : " <= value ") + (r.hi_open ? "< " : "<= ") + number_text(r.hi);
}

int64_t parse_int_flag(const std::string& flag, const std::string& text, const IntRange& range) {
  int64_t v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  if (b != e && *b == '+') ++b;  // from_chars takes no plus sign
  const auto [end, ec] = std::from_chars(b, e, v);
  const std::string expected = range_text(range) + (range.why.empty() ? "" : " (" + range.why + ")");
  if (ec == std::errc::result_out_of_range) refuse(flag, text, expected);
  if (ec != std::errc() || end != e || b == e) refuse(flag, "\"" + text + "\"", "a whole number, " + expected);
  if (v < range.lo || v > range.hi) refuse(flag, text, expected);
  return v;
}

double parse_real_flag(const std::string& flag, const std::string& text, const RealRange& range) {
  char* end = nullptr;
  const double v = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || std::isnan(v))
    refuse(flag, "\"" + text + "\"", "a number, " + range_text(range));
  if (!std::isfinite(v) || v < range.lo || (range.lo_open && v == range.lo) || v > range.hi ||
      (range.hi_open && v == range.hi))
    refuse(flag, text, range_text(range));
  return v;
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
