// Errors: every failure a user can cause is a typed exception carrying what was
// wrong and what was expected. Library code throws; only the CLI turns an error
// into one line on stderr and a non-zero exit status.
#pragma once

#include <stdexcept>
#include <string>

namespace stoke {

// Broad kinds, used by the CLI and by tests that only care about the family.
enum class Errc {
  invalid_argument,  // a flag or parameter value is wrong
  io,                // reading or writing a file failed (the OS said no)
  format,            // a file's content is malformed
  unsupported,       // well-formed, but something stoke deliberately does not run
  refused,           // stoke refuses on purpose (unsafe path, pickle weights, ...)
  not_found,         // a required file, field or tensor is missing
  device,            // accelerator errors (CUDA calls, no device)
  internal,          // a bug in stoke
};

const char* errc_name(Errc code);

class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Errc code() const { return code_; }

 private:
  Errc code_;
};

// Memory could not be allocated (device memory, or host memory for the CPU
// backend). Recoverable: the pipeline halves its token budget and tries again
// (RELIABILITY item 10).
class OutOfMemoryError : public Error {
 public:
  explicit OutOfMemoryError(const std::string& message) : Error(Errc::device, message) {}
};

// An error whose line is already on stderr, said by the code that threw it:
// the CLI prints nothing more and exits with status 1. Every rank of a
// data-parallel job that fails an agreement says its line itself before any
// rank leaves, because a launcher ends the whole job at the first exit.
class ReportedError : public Error {
 public:
  ReportedError(Errc code, const std::string& message) : Error(code, message) {}
};

}  // namespace stoke
