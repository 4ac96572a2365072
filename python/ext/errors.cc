#include "errors.h"

#include <new>

namespace nb = nanobind;

namespace stoke::py {

namespace {
// Set once at import (the module keeps it alive).
PyObject* model_error = nullptr;
}  // namespace

void register_errors(nb::module_& m) {
  // A refused model folder is a bad argument too: `except ValueError` catches it.
  model_error = PyErr_NewExceptionWithDoc("stoke.ModelError",
                                          "A model folder stoke refuses: malformed, unsupported or unsafe files "
                                          "(the message names the file and what was expected).",
                                          PyExc_ValueError, nullptr);
  m.attr("ModelError") = nb::handle(model_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const ModelRefused& e) {
      PyErr_SetString(model_error, e.what());
    } catch (const Error& e) {
      switch (e.code()) {
        case Errc::invalid_argument: PyErr_SetString(PyExc_ValueError, e.what()); break;
        case Errc::not_found: PyErr_SetString(PyExc_FileNotFoundError, e.what()); break;
        case Errc::io: PyErr_SetString(PyExc_OSError, e.what()); break;
        case Errc::format:
        case Errc::unsupported:
        case Errc::refused: PyErr_SetString(PyExc_ValueError, e.what()); break;
        default: PyErr_SetString(PyExc_RuntimeError, e.what()); break;
      }
    }
  });
}

}  // namespace stoke::py
