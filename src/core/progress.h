// Progress on long work: a bar redrawn in place when stderr is a terminal,
// a plain log line every few seconds when it is not (CI logs, files).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace stoke {

class Progress {
 public:
  // total_bytes == 0: unknown size (stdin), shows counts only.
  Progress(std::string what, uint64_t total_bytes, bool enabled = true);
  ~Progress();
  // bytes_done: input bytes whose records are done (an estimate is fine: it
  // drives the bar and the ETA). tokens > 0 adds a tokens/s figure.
  void update(uint64_t records, uint64_t bytes_done, uint64_t tokens = 0);
  void finish();

 private:
  void draw(bool final_line);

  std::string what_;
  uint64_t total_bytes_;
  uint64_t records_ = 0, bytes_ = 0, tokens_ = 0;
  bool enabled_, tty_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace stoke
