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
  // Draws into `out` as a terminal (tty) or a log would, at most once per
  // `interval` (tests draw every update with a zero interval).
  Progress(std::string what, uint64_t total_bytes, std::FILE* out, bool tty, std::chrono::milliseconds interval);
  ~Progress();
  // bytes_done: input bytes whose records are done (an estimate is fine: it
  // drives the bar and the ETA). The bar never moves back: an estimate that
  // dips (embed's scales the bytes read by the share of records done, which
  // falls when the reader runs ahead into shorter or longer records) is held
  // at its highest value. tokens > 0 adds a tokens/s figure.
  void update(uint64_t records, uint64_t bytes_done, uint64_t tokens = 0);
  // The last line, in a log too: at 100% when the work is complete (the
  // figures' estimates may stop short of it), else where it stopped.
  void finish(bool complete = true);
  // Records an earlier run did (a resume): counted in what is shown, not in
  // the rate, which is this run's.
  void set_done_before(uint64_t records) { done_before_ = records; }
  // What the count counts ("records" unless told; training counts "samples").
  void set_unit(std::string unit) { unit_ = std::move(unit); }
  // A short figure shown after the rates, e.g. "loss 0.4132" (the last read one).
  void set_note(std::string note) { note_ = std::move(note); }

 private:
  void draw(bool final_line);
  // The ETA, once it is stable: "" until then (see progress.cc).
  std::string eta(double frac, std::chrono::steady_clock::time_point now);

  std::string what_;
  std::string unit_ = "records", note_;
  uint64_t total_bytes_;
  uint64_t records_ = 0, bytes_ = 0, tokens_ = 0, done_before_ = 0;
  std::string last_line_;  // what a log was last given (finish does not repeat it)
  // The ETA's baseline (the first update with progress) and last estimate.
  double eta_frac0_ = -1, eta_last_ = -1;
  std::chrono::steady_clock::time_point eta_t0_, eta_last_at_;
  bool enabled_, tty_, finished_ = false;
  std::FILE* out_ = stderr;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace stoke
