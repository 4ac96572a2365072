#include "core/progress.h"

#include <unistd.h>

#include <algorithm>

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

void Progress::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  if (tty_ && records_ > 0) {
    draw(true);
    std::fputc('\n', out_);
  }
}

void Progress::draw(bool final_line) {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = secs > 0 ? static_cast<double>(records_) / secs : 0.0;
  char tokens[64] = "";
  if (tokens_ > 0 && secs > 0) std::snprintf(tokens, sizeof tokens, "  %.0f tokens/s", static_cast<double>(tokens_) / secs);
  char line[320];
  if (total_bytes_ > 0) {
    const double frac = std::min(1.0, static_cast<double>(bytes_) / static_cast<double>(total_bytes_));
    const int width = 30, filled = static_cast<int>(frac * width);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(width - filled), '.');
    char eta[48] = "";
    if (frac > 0.01 && frac < 1.0) {
      const auto left = static_cast<long long>(secs * (1.0 - frac) / frac);
      std::snprintf(eta, sizeof eta, "  ETA %lldm%02llds", left / 60, left % 60);
    }
    std::snprintf(line, sizeof line, "%s [%s] %5.1f%%  %llu %s  %.0f/s%s%s%s%s", what_.c_str(), bar.c_str(),
                  frac * 100.0, static_cast<unsigned long long>(records_), unit_.c_str(), rate, tokens,
                  note_.empty() ? "" : "  ", note_.c_str(), eta);
  } else {
    std::snprintf(line, sizeof line, "%s: %llu %s  %.0f/s%s%s%s", what_.c_str(),
                  static_cast<unsigned long long>(records_), unit_.c_str(), rate, tokens, note_.empty() ? "" : "  ",
                  note_.c_str());
  }
  if (tty_)
    std::fprintf(out_, "\r%s\x1b[K", line);
  else if (!final_line)
    std::fprintf(out_, "%s\n", line);
}

}  // namespace stoke
