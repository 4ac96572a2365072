// Several input files as one input (docs/scale-out.md "Inputs at scale"):
// what `--input` names — files, folders, glob patterns, given once or many
// times — expanded into one sorted list of files. Records are numbered across
// the files in that order, and the fingerprint covers every file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stoke {

// Each item: "-" (stdin, only alone), a file, a folder (its regular files whose
// names do not start with '.', not recursive), or a pattern with * ? or [ that
// is not itself a file name (glob(3); no match is an error). The result is
// sorted by path and has no file twice. Throws Error naming the item: missing
// path, a folder with no files, a pattern matching nothing, a file named twice.
std::vector<std::string> expand_input_paths(const std::vector<std::string>& given);

// An input that exists and is neither a file nor a folder: a FIFO, a
// process substitution's /dev/fd/N, a character device — read once, as it
// comes. A missing path is not one (the reader names it), nor is "-": callers
// test for stdin themselves.
bool is_stream(const std::string& path);

// The names a manifest lists the files by: the paths with their common folder
// removed ("a.jsonl", "part/b.jsonl"), so the record does not depend on where
// the input lies.
std::vector<std::string> input_display_names(const std::vector<std::string>& paths);

// Task `index` of `count` under --partition files: the files f with f mod count == index.
std::vector<size_t> files_of_task(size_t files, uint64_t index, uint64_t count);

}  // namespace stoke
