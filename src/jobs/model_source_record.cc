#include "jobs/model_source_record.h"

#include <filesystem>

namespace stoke {

namespace fs = std::filesystem;

nlohmann::ordered_json model_source_json(const CommonOptions& o) {
  nlohmann::ordered_json j;
  j["given"] = o.model_location ? o.model_location->given : o.model;
  std::error_code ec;
  const fs::path abs = fs::absolute(o.model, ec);
  j["path"] = (ec ? fs::path(o.model) : abs).lexically_normal().string();
  if (o.model_location && o.model_location->hub) {
    const HubSnapshot& h = *o.model_location->hub;
    j["hub"] = {{"repo_id", h.repo_id}, {"revision", h.revision}, {"commit", h.commit}, {"cache", h.root.string()}};
  } else {
    j["hub"] = nullptr;
  }
  return j;
}

}  // namespace stoke
