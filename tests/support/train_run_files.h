// What a `stoke train` run leaves in its output folder, read back by the CLI
// tests: the log's lines, the log without its timings (what must be
// identical after a resume), and two saved models compared tensor by tensor.
#pragma once

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "support/goldens.h"

namespace stoke::test {

inline std::vector<nlohmann::json> log_lines(const std::filesystem::path& dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(dir / "log.jsonl");
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

inline std::vector<nlohmann::json> results_of(std::vector<nlohmann::json> lines) {
  for (nlohmann::json& l : lines)
    for (const char* timing : {"samples_per_s", "tokens_per_s", "host_syncs"}) l.erase(timing);
  return lines;
}

// Every tensor of `a` within rel_tol of b's (relative L2); the attention key
// biases, whose gradient is mathematically zero, within 3e-3 absolute.
inline void expect_models_close(const std::filesystem::path& a_path, const std::filesystem::path& b_path,
                                double rel_tol, const std::string& what) {
  auto a_file = SafetensorsFile::open(a_path);
  auto b_file = SafetensorsFile::open(b_path);
  for (const StoredTensor& t : a_file->tensors()) {
    const StoredTensor* u = b_file->find(t.name);
    ASSERT_NE(u, nullptr) << what << ": " << t.name;
    std::vector<float> a(static_cast<size_t>(t.numel())), b(a.size());
    std::memcpy(a.data(), t.data.data(), a.size() * 4);
    std::memcpy(b.data(), u->data.data(), b.size() * 4);
    if (t.name.find("attention.self.key.bias") != std::string::npos) {
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 3e-3) << what << " " << t.name;
      continue;
    }
    EXPECT_LE(goldens::relative_error(b, std::vector<double>(a.begin(), a.end())), rel_tol) << what << " " << t.name;
  }
}

}  // namespace stoke::test
