#include "jobs/version.h"

namespace stoke {
const char* stoke_version() { return STOKE_VERSION; }
}  // namespace stoke
