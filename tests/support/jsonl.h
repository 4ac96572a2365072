// JSON Lines as tests read them: one value per non-empty line.
#pragma once

#include <filesystem>
#include <fstream>
#include <istream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stoke::test {

inline std::vector<nlohmann::json> parse_jsonl(std::istream& in) {
  std::vector<nlohmann::json> rows;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path);
  return parse_jsonl(in);
}

inline std::vector<nlohmann::json> jsonl_rows(const std::string& text) {
  std::istringstream in(text);
  return parse_jsonl(in);
}

}  // namespace stoke::test
