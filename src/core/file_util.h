// Small helpers for reading whole files with errors that name the file.
#pragma once

#include <filesystem>
#include <string>

namespace stoke {

// Reads a file into a string; throws Error(io / not_found) naming the path.
std::string read_file(const std::filesystem::path& path);

}  // namespace stoke
