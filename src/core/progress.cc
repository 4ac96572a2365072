#include "core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace stoke {

// A terminal gets 10 redraws a second; a log gets a line every 5 seconds.
Progress::Progress(std::string what, uint64_t total_bytes, bool enabled)
    : Progress(std::move(what), total_bytes, stderr, ::isatty(STDERR_FILENO) == 1,
               std::chrono::milliseconds(::isatty(STDERR_FILENO) == 1 ? 100 : 5000)) {
  enabled_ = enabled;
}

Progress::Progress(std::string what, uint64_t total_bytes, std::FILE* out, bool tty, std::chrono::milliseconds interval)
    : what_(std::move(what)), total_bytes_(total_bytes), enabled_(true), tty_(tty), out_(out), interval_(interval),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

Progress::~Progress() {
  if (!finished_ && enabled_ && tty_ && records_ > 0) std::fputc('\n', out_);
}

void Progress::update(uint64_t records, uint64_t bytes_done, uint64_t tokens) {
  records_ = records;
  tokens_ = tokens;
  bytes_ = std::max(bytes_, bytes_done);  // never backwards (see the header)
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < interval_) return;
  last_draw_ = now;
  draw(false);
}

void Progress::finish(bool complete) {
  if (!enabled_ || finished_) return;
  finished_ = true;
  if (complete) bytes_ = std::max(bytes_, total_bytes_);
  if (records_ + done_before_ == 0) return;
  draw(true);
  if (tty_) std::fputc('\n', out_);
}

// An ETA from the first moments is noise: the pipeline is filling, and embed's
// batches run longest first. So the rate is measured from the first update
// that shows progress (not from the start, nor over an earlier run's share),
// and the ETA is shown only once 3 s and 2% of the work have passed since
// then and two estimates a second or more apart agree within 25%.
std::string Progress::eta(double frac, std::chrono::steady_clock::time_point now) {
  if (frac <= 0 || frac >= 1.0) return "";
  if (eta_frac0_ < 0) {
    eta_frac0_ = frac;
    eta_t0_ = now;
    return "";
  }
  const double secs = std::chrono::duration<double>(now - eta_t0_).count();
  const double gained = frac - eta_frac0_;
  if (secs < 3.0 || gained < 0.02) return "";
  const double left = secs * (1.0 - frac) / gained;
  const double since_last = std::chrono::duration<double>(now - eta_last_at_).count();
  const bool stable = eta_last_ > 0 && std::abs(left - eta_last_) <= 0.25 * std::max(left, eta_last_);
  if (eta_last_ < 0 || since_last >= 1.0) {
    const double previous = eta_last_;
    eta_last_ = left;
    eta_last_at_ = now;
    if (previous < 0) return "";
  }
  if (!stable) return "";
  char buf[48];
  const auto l = static_cast<long long>(left);
  std::snprintf(buf, sizeof buf, "  ETA %lldm%02llds", l / 60, l % 60);
  return buf;
}

void Progress::draw(bool final_line) {
  const auto now = std::chrono::steady_clock::now();
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double rate = secs > 0 ? static_cast<double>(records_) / secs : 0.0;  // this run's records only
  const uint64_t shown = records_ + done_before_;
  char tokens[64] = "";
  if (tokens_ > 0 && secs > 0) std::snprintf(tokens, sizeof tokens, "  %.0f tokens/s", static_cast<double>(tokens_) / secs);
  char line[320];
  if (total_bytes_ > 0) {
    const double frac = std::min(1.0, static_cast<double>(bytes_) / static_cast<double>(total_bytes_));
    const int width = 30, filled = static_cast<int>(frac * width);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(width - filled), '.');
    const std::string eta_text = final_line ? "" : eta(frac, now);
    std::snprintf(line, sizeof line, "%s [%s] %5.1f%%  %llu %s  %.0f/s%s%s%s%s", what_.c_str(), bar.c_str(),
                  frac * 100.0, static_cast<unsigned long long>(shown), unit_.c_str(), rate, tokens,
                  note_.empty() ? "" : "  ", note_.c_str(), eta_text.c_str());
  } else {
    std::snprintf(line, sizeof line, "%s: %llu %s  %.0f/s%s%s%s", what_.c_str(),
                  static_cast<unsigned long long>(shown), unit_.c_str(), rate, tokens, note_.empty() ? "" : "  ",
                  note_.c_str());
  }
  if (tty_) {
    std::fprintf(out_, "\r%s\x1b[K", line);
    return;
  }
  // A log's last line is the final state; a line it already has is not repeated
  // (the rates differ by a moment: compare up to the count).
  const std::string text(line);
  const size_t unit_at = text.find(" " + unit_);
  const std::string state = unit_at == std::string::npos ? text : text.substr(0, unit_at);
  if (final_line && state == last_line_) return;
  last_line_ = state;
  std::fprintf(out_, "%s\n", line);
}

}  // namespace stoke
