// An Ops whose every op throws Error(unsupported) naming the op and the
// backend, generated from backend/op_list.h: a backend derives from it and
// overrides only the ops it has, so a new op in the list costs a backend
// nothing until it implements it.
#pragma once

#include <string>
#include <utility>

#include "backend/ops.h"
#include "core/error.h"

namespace stoke {

class UnsupportedOps : public Ops {
 public:
  // backend: its name in messages ("cuda"); advice: what the user can do
  // instead, appended after "; " (may be empty).
  UnsupportedOps(std::string backend, std::string advice)
      : backend_(std::move(backend)), advice_(std::move(advice)) {}

#define STOKE_OP(name, params, args) \
  void name params const override { unsupported(#name); }
#include "backend/op_list.h"
#undef STOKE_OP

 protected:
  // "<op>: not supported on the <backend> backend[; <advice>]".
  [[noreturn]] void unsupported(const char* op) const {
    std::string msg = std::string(op) + ": not supported on the " + backend_ + " backend";
    if (!advice_.empty()) msg += "; " + advice_;
    throw Error(Errc::unsupported, msg);
  }

 private:
  std::string backend_;
  std::string advice_;
};

}  // namespace stoke
