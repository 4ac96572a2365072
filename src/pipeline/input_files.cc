#include "pipeline/input_files.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/error.h"

namespace stoke {

namespace fs = std::filesystem;

namespace {

bool is_pattern(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

void add_folder(const std::string& dir, std::vector<std::string>& out) {
  std::vector<std::string> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;  // .stoke.lock, editors' files, ...
    if (it->is_regular_file(ec)) found.push_back(it->path().string());
  }
  if (ec) throw Error(Errc::io, "--input " + dir + ": cannot list the folder: " + ec.message());
  if (found.empty()) throw Error(Errc::not_found, "--input " + dir + ": the folder holds no input files");
  out.insert(out.end(), found.begin(), found.end());
}

void add_pattern(const std::string& pattern, std::vector<std::string>& out) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> found;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      std::error_code ec;
      if (fs::is_regular_file(g.gl_pathv[i], ec)) found.push_back(g.gl_pathv[i]);
    }
  ::globfree(&g);
  if (rc == GLOB_ABORTED) throw Error(Errc::io, "--input " + pattern + ": a folder of the pattern cannot be read");
  if (found.empty())
    throw Error(Errc::not_found, "--input " + pattern + ": the pattern matches no file (expected files, a folder, "
                                 "or a pattern such as 'parts/*.jsonl' — quoted, so stoke expands it)");
  out.insert(out.end(), found.begin(), found.end());
}

}  // namespace

bool is_stream(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  return !ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st) &&
         !std::filesystem::is_directory(st);
}

std::vector<std::string> expand_input_paths(const std::vector<std::string>& given) {
  if (given.empty()) return {"-"};
  if (given.size() == 1 && given[0] == "-") return given;
  std::vector<std::string> out;
  for (const std::string& item : given) {
    if (item == "-")
      throw Error(Errc::invalid_argument, "--input -: stdin cannot be one of several inputs (give files only)");
    std::error_code ec;
    const fs::file_status st = fs::status(item, ec);
    if (fs::is_directory(st)) add_folder(item, out);
    else if (fs::exists(st) || !is_pattern(item)) out.push_back(item);  // a missing file: the reader names it
    else add_pattern(item, out);
  }
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i] == out[i - 1])
      throw Error(Errc::invalid_argument, "--input: " + out[i] + " is given twice (its records would be counted twice)");
  return out;
}

std::vector<std::string> input_display_names(const std::vector<std::string>& paths) {
  if (paths.empty()) return {};
  // The longest folder every path starts with.
  std::vector<fs::path> parts;
  for (const auto& p : fs::path(paths[0]).parent_path()) parts.push_back(p);
  for (const std::string& s : paths) {
    std::vector<fs::path> own;
    for (const auto& p : fs::path(s).parent_path()) own.push_back(p);
    size_t k = 0;
    while (k < parts.size() && k < own.size() && parts[k] == own[k]) ++k;
    parts.resize(k);
  }
  std::vector<std::string> names;
  for (const std::string& s : paths) {
    fs::path rel;
    size_t k = 0;
    for (const auto& p : fs::path(s)) {
      if (k++ < parts.size()) continue;
      rel /= p;
    }
    names.push_back(rel.generic_string());
  }
  return names;
}

std::vector<size_t> files_of_task(size_t files, uint64_t index, uint64_t count) {
  std::vector<size_t> own;
  for (size_t f = static_cast<size_t>(index); f < files; f += static_cast<size_t>(count)) own.push_back(f);
  return own;
}

}  // namespace stoke
