// An error a request earns: the HTTP status TEI's router gives for it, the
// TEI error_type, and one line saying what was wrong. The route's API decides
// the body's shape (TEI's {"error", "error_type"} or OpenAI's {"error": {...}}).
#pragma once

#include <stdexcept>
#include <string>

namespace stoke::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string error_type, const std::string& message, std::string param = {})
      : std::runtime_error(message), status_(status), type_(std::move(error_type)), param_(std::move(param)) {}
  int status() const { return status_; }
  // TEI's ErrorType: "Validation", "Empty", "Tokenizer", "Overloaded", "Unhealthy", "Backend".
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }  // the request field at fault, when one is

 private:
  int status_;
  std::string type_;
  std::string param_;
};

// 422: well-formed JSON whose shape, types or values the route does not accept.
inline ApiError validation_error(const std::string& message, std::string param = {}) {
  return ApiError(422, "Validation", message, std::move(param));
}
// 400: an empty input (an empty list or an empty string), as TEI answers it.
inline ApiError empty_error(const std::string& message, std::string param = {}) {
  return ApiError(400, "Empty", message, std::move(param));
}

}  // namespace stoke::serve
