#include "core/error.h"

namespace stoke {

const char* errc_name(Errc code) {
  switch (code) {
    case Errc::invalid_argument: return "invalid argument";
    case Errc::io: return "i/o error";
    case Errc::format: return "format error";
    case Errc::unsupported: return "unsupported";
    case Errc::refused: return "refused";
    case Errc::not_found: return "not found";
    case Errc::device: return "device error";
    case Errc::internal: return "internal error";
  }
  return "error";
}

}  // namespace stoke
