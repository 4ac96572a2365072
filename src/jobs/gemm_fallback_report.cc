#include "jobs/gemm_fallback_report.h"

namespace stoke {

std::vector<std::string> gemm_fallback_lines(const Backend& backend) {
  std::vector<std::string> lines;
  for (const Backend::GemmFallback& f : backend.gemm_fallbacks())
    lines.push_back(f.op + " " + f.shape + ": " + std::to_string(f.calls) + (f.calls == 1 ? " call (" : " calls (") +
                    f.why + ")");
  return lines;
}

nlohmann::json gemm_fallback_json(const Backend& backend) {
  nlohmann::json out = nlohmann::json::array();
  for (const Backend::GemmFallback& f : backend.gemm_fallbacks())
    out.push_back({{"op", f.op}, {"shape", f.shape}, {"why", f.why}, {"calls", f.calls}});
  return out;
}

}  // namespace stoke
