#include "jobs/text_records.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/utf8.h"

namespace stoke {

using json = nlohmann::json;

JsonlTextReader::JsonlTextReader(const std::string& path, std::string text_field, std::string pair_field,
                                 std::string id_field)
    : label_(path == "-" ? "<stdin>" : path),
      text_field_(std::move(text_field)),
      pair_field_(std::move(pair_field)),
      id_field_(std::move(id_field)) {
  if (path == "-") {
    in_ = &std::cin;
    return;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(Errc::not_found, path + ": no such input file (expected a JSONL file, or - for stdin)");
  auto file = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*file) throw Error(Errc::io, path + ": cannot open for reading");
  total_ = std::filesystem::file_size(path, ec);
  in_ = file.get();
  owned_ = std::move(file);
}

JsonlTextReader::~JsonlTextReader() = default;

bool JsonlTextReader::next(TextRecord& record) {
  for (;;) {
    if (!std::getline(*in_, line_)) {
      if (in_->bad()) throw Error(Errc::io, label_ + ": read failed after line " + std::to_string(line_no_));
      return false;
    }
    ++line_no_;
    bytes_ += line_.size() + 1;
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    // Blank lines separate nothing in JSONL; skipping them loses no record.
    if (line_.find_first_not_of(" \t") == std::string::npos) continue;
    break;
  }
  const std::string where = label_ + ":" + std::to_string(line_no_);
  size_t replaced = 0;
  // Invalid UTF-8 is replaced (and counted) before parsing, so a stray byte
  // inside a string costs one U+FFFD instead of the whole record.
  const std::string clean = utf8_sanitize(line_, &replaced);
  json doc = json::parse(clean, nullptr, false);
  if (doc.is_discarded()) throw Error(Errc::format, where + ": not valid JSON (expected one JSON object per line)");
  if (!doc.is_object()) throw Error(Errc::format, where + ": expected a JSON object, found " + doc.type_name());
  auto text = doc.find(text_field_);
  if (text == doc.end())
    throw Error(Errc::format, where + ": field \"" + text_field_ + "\" is missing (expected a string)");
  if (!text->is_string())
    throw Error(Errc::format, where + ": field \"" + text_field_ + "\": expected a string, found " + text->type_name());
  record.text = text->get<std::string>();
  record.pair.reset();
  if (!pair_field_.empty()) {
    auto pair = doc.find(pair_field_);
    if (pair != doc.end() && !pair->is_null()) {
      if (!pair->is_string())
        throw Error(Errc::format,
                    where + ": field \"" + pair_field_ + "\": expected a string or null, found " + pair->type_name());
      record.pair = pair->get<std::string>();
    }
  }
  record.id_json.clear();
  if (!id_field_.empty()) {
    auto id = doc.find(id_field_);
    if (id == doc.end() || id->is_null())
      throw Error(Errc::format, where + ": field \"" + id_field_ + "\" (--id-field) is missing");
    record.id_json = id->dump();
  }
  record.line = line_no_;
  record.replaced_utf8 = replaced;
  return true;
}

}  // namespace stoke
