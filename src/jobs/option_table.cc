#include "jobs/option_table.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace stoke {

namespace {

// The one line every refused value gets: "--flag value: expected ...".
[[noreturn]] void refuse(const std::string& flag, const std::string& text, const std::string& expected) {
  throw Error(Errc::invalid_argument, flag + " " + text + ": expected " + expected);
}

}  // namespace

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string int_range_text(int64_t lo, int64_t hi) { return std::to_string(lo) + " to " + std::to_string(hi); }

std::string real_range_text(double lo, double hi, bool lo_open, bool hi_open) {
  if (!lo_open && !hi_open) return number_text(lo) + " to " + number_text(hi);
  return number_text(lo) + (lo_open ? " < value " : " <= value ") + (hi_open ? "< " : "<= ") + number_text(hi);
}

int64_t parse_int_option(const std::string& flag, const std::string& text, int64_t lo, int64_t hi,
                         const std::string& why) {
  int64_t v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  if (b != e && *b == '+') ++b;  // from_chars takes no plus sign
  const auto [end, ec] = std::from_chars(b, e, v);
  const std::string expected = int_range_text(lo, hi) + (why.empty() ? "" : " (" + why + ")");
  if (ec == std::errc::result_out_of_range) refuse(flag, text, expected);
  if (ec != std::errc() || end != e || b == e) refuse(flag, "\"" + text + "\"", "a whole number, " + expected);
  if (v < lo || v > hi) refuse(flag, text, expected);
  return v;
}

double parse_real_option(const std::string& flag, const std::string& text, double lo, double hi, bool lo_open,
                         bool hi_open) {
  char* end = nullptr;
  const double v = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  const std::string range = real_range_text(lo, hi, lo_open, hi_open);
  if (text.empty() || end != text.c_str() + text.size() || std::isnan(v)) refuse(flag, "\"" + text + "\"", "a number, " + range);
  if (!std::isfinite(v) || v < lo || (lo_open && v == lo) || v > hi || (hi_open && v == hi)) refuse(flag, text, range);
  return v;
}

const std::string& parse_word_option(const std::string& flag, const std::string& text,
                                     const std::vector<std::string>& choices) {
  for (const std::string& c : choices)
    if (c == text) return c;
  std::string list;  // "stop or skip", "linear, constant or cosine"
  for (size_t i = 0; i < choices.size(); ++i)
    list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  refuse(flag, "\"" + text + "\"", list);
}

bool parse_flag_option(const std::string& flag, const std::string& text) {
  if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return false;
  refuse(flag, "\"" + text + "\"", "true or false");
}

int64_t parse_bytes_option(const std::string& flag, const std::string& text) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    pos = 0;
  }
  if (pos == 0 || v <= 0) throw Error(Errc::invalid_argument, flag + " \"" + text + "\": expected bytes, e.g. 8G or 512M");
  const std::string unit = text.substr(pos);
  double mul = 1;
  if (unit == "K" || unit == "KB" || unit == "KiB") mul = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MiB") mul = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GiB") mul = 1024.0 * 1024 * 1024;
  else if (!unit.empty()) throw Error(Errc::invalid_argument, flag + " \"" + text + "\": unknown unit \"" + unit + "\"");
  // NaN, infinities and more than 2^62 bytes cannot be a budget (and would not convert to int64).
  if (!(v * mul >= 1) || !(v * mul <= 4.6e18))
    throw Error(Errc::invalid_argument, flag + " \"" + text + "\": expected 1 byte to 4 EiB, e.g. 8G or 512M");
  return static_cast<int64_t>(v * mul);
}

}  // namespace stoke
