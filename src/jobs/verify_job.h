// `stoke verify DIR...`: proves that a set of `stoke embed` output folders —
// one per task of a `--shard-index i --num-shards N` split, or one unsplit
// folder — is complete, consistent and intact, as docs/output-format.md
// defines them. Reads only; never changes a folder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stoke {

struct VerifyReport {
  // One line per problem, "<folder>: <what is wrong>" (or "tasks: ..." for the
  // set as a whole). Empty when the set verifies.
  std::vector<std::string> problems;
  // Things worth saying that are not wrong (leftover temporary files, ...).
  std::vector<std::string> notes;
  uint64_t folders = 0;  // folders given
  uint64_t tasks = 0;    // distinct task indexes among the readable manifests
  uint64_t records = 0;  // records in the whole input (counts.records of a complete manifest)
  uint64_t rows = 0;     // embedded rows, all folders
  uint64_t skipped = 0;  // bad records in errors.jsonl, all folders
};

// Checks every folder and lists every problem it finds; problems in the data
// never throw. A folder whose manifest cannot be read gets one problem and no
// deeper checks (so one bad file does not bury the report in consequences).
VerifyReport run_verify(const std::vector<std::string>& folders);

}  // namespace stoke
