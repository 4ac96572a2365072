// How stoke's typed errors reach Python: the same one-line message the CLI
// prints, as the exception a Python caller expects for its kind.
#pragma once

#include <string>

#include <nanobind/nanobind.h>

#include "core/error.h"

namespace stoke::py {

// A model folder stoke refuses (malformed, unsupported, unsafe): raised in
// Python as stoke.ModelError.
class ModelRefused : public Error {
 public:
  explicit ModelRefused(const Error& e) : Error(e.code(), e.what()) {}
};

// Registers stoke.ModelError on the module and the translator for every
// exception the bindings let through:
//   invalid_argument -> ValueError, not_found -> FileNotFoundError,
//   io -> OSError, ModelRefused -> stoke.ModelError, the rest -> RuntimeError.
void register_errors(nanobind::module_& m);

}  // namespace stoke::py
