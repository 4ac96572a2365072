#include "jobs/skipped_records.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace stoke {

SkippedRecords::SkippedRecords(const std::string& output, const std::string& errors_path, std::string input_label)
    : input_(std::move(input_label)) {
  path_ = !errors_path.empty() ? errors_path : output == "-" ? std::string() : output + ".errors.jsonl";
  if (!path_.empty() && path_ == output)
    throw Error(Errc::invalid_argument, "--errors " + errors_path + ": is the --output file");
  where_ = path_.empty() ? "stderr" : path_;
}

void SkippedRecords::add(const InputRecord& record) {
  ++count_;
  if (path_.empty()) {
    std::fprintf(stderr, "stoke: skipped record %llu: %s:%llu: %s\n", static_cast<unsigned long long>(record.index),
                 input_.c_str(), static_cast<unsigned long long>(record.line), record.error.c_str());
    return;
  }
  if (!file_) file_ = std::make_unique<OutputFile>(path_);
  const nlohmann::ordered_json line = {
      {"record", record.index}, {"file", input_}, {"line", record.line}, {"error", record.error}};
  file_->write(line.dump() + "\n");
}

void SkippedRecords::commit() {
  if (file_) file_->commit();
}

}  // namespace stoke
