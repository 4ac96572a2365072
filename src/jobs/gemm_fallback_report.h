// The GEMMs a run sent to the backend's slow plain kernel (Backend::
// gemm_fallbacks), as the run's report, run.json / the manifest and the
// doctor show them: one line each, and the same as JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace stoke {

// "linear_backward dw M3072 N768 K4096 F32*BF16->F32: 24 calls (operand mix cuBLASLt does not take)"
std::vector<std::string> gemm_fallback_lines(const Backend& backend);
// [{"op", "shape", "why", "calls"}, ...]; [] when none fell back.
nlohmann::json gemm_fallback_json(const Backend& backend);

}  // namespace stoke
