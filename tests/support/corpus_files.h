// Inputs cut from the fixtures' corpus and comparisons of embed output
// folders, for the CLI tests that run jobs on them (stop, resume, kill).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "support/fixtures.h"

namespace stoke::test {

// The first n fortunes as JSONL, in a fresh scratch folder `scratch`.
inline std::filesystem::path fortunes_prefix(const std::string& scratch, size_t n) {
  const std::filesystem::path path = scratch_dir(scratch) / "texts.jsonl";
  std::ifstream in(fixture("corpus/fortunes-multilingual.jsonl"));
  std::ofstream out(path);
  std::string line;
  for (size_t i = 0; i < n && std::getline(in, line); ++i) out << line << '\n';
  return path;
}

// Long documents for chunking: fortunes joined `per_doc` at a time, a
// blank line after every fourth (paragraphs), as texts.
inline std::vector<std::string> long_documents(size_t docs, size_t per_doc) {
  std::ifstream in(fixture("corpus/fortunes-multilingual.jsonl"));
  std::vector<std::string> out;
  std::string line, doc;
  size_t n = 0;
  while (out.size() < docs && std::getline(in, line)) {
    doc += (doc.empty() ? "" : (n % 4 == 0 ? "\n\n" : " ")) + nlohmann::json::parse(line)["text"].get<std::string>();
    if (++n % per_doc == 0) {
      out.push_back(doc);
      doc.clear();
    }
  }
  return out;
}

// Texts as JSONL ({"text": ...}) in a fresh scratch folder `scratch`.
inline std::filesystem::path texts_file(const std::string& scratch, const std::vector<std::string>& texts) {
  const std::filesystem::path path = scratch_dir(scratch) / "texts.jsonl";
  std::ofstream out(path);
  for (const std::string& t : texts) out << nlohmann::json{{"text", t}}.dump() << '\n';
  return path;
}

// n fortunes labelled by language, spread over the corpus (it is grouped by
// language), as training or classification data.
inline std::filesystem::path language_labelled(const std::string& scratch, size_t n) {
  const std::filesystem::path path = scratch_dir(scratch) / "data.jsonl";
  std::ifstream in(fixture("corpus/fortunes-multilingual.jsonl"));
  std::ofstream out(path);
  std::string line;
  size_t written = 0;
  for (size_t i = 0; written < n && std::getline(in, line); ++i) {
    if (i % (24000 / n) != 0) continue;
    const nlohmann::json r = nlohmann::json::parse(line);
    out << nlohmann::json{{"text", r["text"]}, {"label", r["lang"]}}.dump() << "\n";
    ++written;
  }
  return path;
}

// Every data file of an embed output folder (embeddings, ids, errors, kept
// batches), by name: all but the manifest and the lock.
inline std::map<std::string, std::string> output_data_files(const std::filesystem::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name != "manifest.json" && name != ".stoke.lock") files[name] = read_file(e.path());
  }
  return files;
}

inline void expect_same_output_files(const std::filesystem::path& expected, const std::filesystem::path& actual) {
  const auto a = output_data_files(expected), b = output_data_files(actual);
  ASSERT_EQ(a.size(), b.size()) << actual;
  for (const auto& [name, bytes] : a) {
    auto it = b.find(name);
    ASSERT_NE(it, b.end()) << name << " missing in " << actual;
    EXPECT_TRUE(it->second == bytes) << name << " differs in " << actual;
  }
}

}  // namespace stoke::test
