// Where tokenize and classify put the records `--on-error skip` skipped
// (RELIABILITY 5): one JSON line each, {"record", "file", "line", "error"},
// as embed's OUT_DIR/errors.jsonl. The record number ties the gap in the
// output back to the input: every other record still has its line, in order.
//   --errors FILE          that file
//   --output FILE          FILE.errors.jsonl
//   --output - (stdout)    one line per skipped record on stderr (stdout is
//                          the data; a second stream would need a path)
// The file appears only when a record was skipped, and only complete (written
// under a temporary name and renamed by commit()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "jobs/output_file.h"
#include "pipeline/record_reader.h"

namespace stoke {

class SkippedRecords {
 public:
  SkippedRecords(const std::string& output, const std::string& errors_path, std::string input_label);
  void add(const InputRecord& record);
  void commit();
  uint64_t count() const { return count_; }
  // Where the skipped records went, for the summary ("out.jsonl.errors.jsonl", "stderr").
  const std::string& where() const { return where_; }

 private:
  std::string path_, where_, input_;
  std::unique_ptr<OutputFile> file_;  // opened at the first skipped record
  uint64_t count_ = 0;
};

}  // namespace stoke
