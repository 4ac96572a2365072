// Reading JSONL text records for jobs: one JSON object per line with a text
// field (and optionally a pair field). A bad record is an error naming the
// file, the line, the field and what was expected.
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <string>

namespace stoke {

struct TextRecord {
  std::string text;
  std::optional<std::string> pair;
  std::string id_json;      // the id field's value as JSON, when an id field is asked for
  uint64_t line = 0;        // 1-based line in the input
  uint64_t replaced_utf8 = 0;
};

class JsonlTextReader {
 public:
  // path "-" reads stdin.
  // id_field "" means no id is read.
  JsonlTextReader(const std::string& path, std::string text_field, std::string pair_field,
                  std::string id_field = {});
  ~JsonlTextReader();
  // False at end of input; throws Error(format) on a bad record.
  bool next(TextRecord& record);
  uint64_t bytes_read() const { return bytes_; }
  uint64_t total_bytes() const { return total_; }  // 0 for stdin
  const std::string& label() const { return label_; }

 private:
  std::string label_, text_field_, pair_field_, id_field_;
  std::unique_ptr<std::istream> owned_;
  std::istream* in_;
  std::string line_;
  uint64_t line_no_ = 0, bytes_ = 0, total_ = 0;
};

}  // namespace stoke
