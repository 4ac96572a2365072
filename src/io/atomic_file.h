// Crash-safe file replacement: the bytes go to a temporary file in the same
// folder, which is fsync'd, renamed over the target, and the folder fsync'd, so
// after a crash the target holds either the old or the new content, never a mix,
// and a temp file is never mistaken for the target.
#pragma once

#include <filesystem>
#include <span>
#include <string_view>

namespace stoke {

// Throws Error(Errc::io) naming the path and the failing step (open, write, fsync, rename).
void write_file_atomic(const std::filesystem::path& path, std::span<const std::byte> bytes);
void write_file_atomic(const std::filesystem::path& path, std::string_view text);
// fsync a folder so a rename inside it is durable.
void fsync_directory(const std::filesystem::path& dir);
// True for the temporary names write_file_atomic uses ("<name>.stoke-tmp-<pid>-<n>").
bool is_temp_name(const std::filesystem::path& path);

}  // namespace stoke
