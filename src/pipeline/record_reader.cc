#include "pipeline/record_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/utf8.h"

namespace stoke {

using json = nlohmann::json;

InputFormat input_format_from_name(const std::string& name) {
  if (name == "jsonl") return InputFormat::jsonl;
  if (name == "csv") return InputFormat::csv;
  if (name == "tsv") return InputFormat::tsv;
  if (name == "text") return InputFormat::text;
  throw Error(Errc::invalid_argument, "--input-format \"" + name + "\": expected jsonl, csv, tsv or text");
}

const char* input_format_name(InputFormat f) {
  switch (f) {
    case InputFormat::jsonl: return "jsonl";
    case InputFormat::csv: return "csv";
    case InputFormat::tsv: return "tsv";
    case InputFormat::text: return "text";
  }
  return "jsonl";
}

InputFormat input_format_for_path(const std::string& path) {
  if (path == "-") return InputFormat::jsonl;
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext == ".csv") return InputFormat::csv;
  if (ext == ".tsv" || ext == ".tab") return InputFormat::tsv;
  if (ext == ".txt") return InputFormat::text;
  return InputFormat::jsonl;
}

namespace {

class FdSource : public ByteSource {
 public:
  FdSource(int fd, bool owned, std::string label) : fd_(fd), owned_(owned), label_(std::move(label)) {}
  ~FdSource() override {
    if (owned_) ::close(fd_);
  }
  size_t read(char* buf, size_t n) override {
    for (;;) {
      const ssize_t got = ::read(fd_, buf, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno == EINTR) continue;
      throw Error(Errc::io, label_ + ": read failed: " + std::strerror(errno));
    }
  }

 private:
  int fd_;
  bool owned_;
  std::string label_;
};

class MemorySource : public ByteSource {
 public:
  MemorySource(std::string data, size_t max_read) : data_(std::move(data)), max_read_(std::max<size_t>(max_read, 1)) {}
  size_t read(char* buf, size_t n) override {
    const size_t k = std::min({n, max_read_, data_.size() - pos_});
    std::memcpy(buf, data_.data() + pos_, k);
    pos_ += k;
    return k;
  }

 private:
  std::string data_;
  size_t max_read_, pos_ = 0;
};

// How a byte of the input reads in a message: printable ASCII as itself, anything else as hex.
std::string show_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", u);
  return hex;
}

std::string quoted_name(const std::string& s) { return json(utf8_sanitize(s)).dump(); }

}  // namespace

std::unique_ptr<ByteSource> memory_byte_source(std::string data, size_t max_read) {
  return std::make_unique<MemorySource>(std::move(data), max_read);
}

struct RecordReader::CsvRow {
  std::vector<std::string> fields;  // [0, count) are this row's; the rest keep their capacity
  size_t count = 0;
  uint64_t line = 0;
  std::string error;  // the first thing wrong with the row

  std::string* start_field(bool keep) {
    ++count;
    if (!keep) return nullptr;
    if (fields.size() < count) fields.emplace_back();
    fields[count - 1].clear();
    return &fields[count - 1];
  }
};

namespace {

void check_fields(const RecordReaderOptions& o, InputFormat format) {
  if (format == InputFormat::text) {
    // text_field is not checked: it has a default, and plain text ignores it.
    for (const auto& [flag, value] : {std::pair<const char*, const std::string&>{"--id-field", o.id_field},
                                      std::pair<const char*, const std::string&>{"--pair-field", o.pair_field},
                                      std::pair<const char*, const std::string&>{"--label-field", o.label_field}}) {
      if (!value.empty())
        throw Error(Errc::invalid_argument,
                    std::string(flag) + " \"" + value +
                        "\" cannot be used with plain text input: a text file has no fields (each line is one "
                        "text); use JSONL, CSV or TSV input for ids and pairs");
    }
    if (!o.more_fields.empty())
      throw Error(Errc::invalid_argument, "column \"" + o.more_fields[0] +
                                              "\" cannot be read from plain text input: a text file has no fields; "
                                              "use JSONL, CSV or TSV input");
    return;
  }
  if (o.text_field.empty()) throw Error(Errc::invalid_argument, "--text-field: expected a field name");
}

}  // namespace

namespace {

// A regular file's size, or 0 for stdin, pipes and devices; throws naming a missing path or a folder.
uint64_t input_size(const std::string& path) {
  if (path == "-") return 0;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      throw Error(Errc::not_found, path + ": no such input file (expected a JSONL, CSV, TSV or text file, or - for stdin)");
    throw Error(Errc::io, path + ": cannot read: " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) throw Error(Errc::invalid_argument, path + ": is a folder (expected an input file)");
  // Pipes and process substitutions have no size; progress then shows bytes only.
  return S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
}

std::unique_ptr<ByteSource> open_input(const std::string& path) {
  if (path == "-") return std::make_unique<FdSource>(STDIN_FILENO, false, "<stdin>");
  // /dev/stdin is our descriptor 0 itself: opening the path again would
  // block for ever on a named FIFO whose writer has already gone.
  const bool is_stdin = path == "/dev/stdin" || path == "/dev/fd/0" || path == "/proc/self/fd/0";
  const int fd = is_stdin ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(Errc::io, path + ": cannot open for reading: " + std::strerror(errno));
  return std::make_unique<FdSource>(fd, !is_stdin, path);
}

}  // namespace

RecordReader::RecordReader(RecordReaderOptions options) : options_(std::move(options)) {
  paths_ = options_.paths.empty() ? std::vector<std::string>{options_.path} : options_.paths;
  format_ = options_.format ? *options_.format : input_format_for_path(paths_[0]);
  check_fields(options_, format_);
  for (const std::string& p : paths_) total_bytes_ += input_size(p);  // every file named before any is read
  buf_.resize(kDefaultBufferBytes);
  open_file(0);
}

void RecordReader::open_file(size_t i) {
  file_ = i;
  const std::string& path = paths_[i];
  label_ = path == "-" ? "<stdin>" : path;
  source_.reset();
  source_ = open_input(path);
  pos_ = end_ = 0;
  eof_ = started_ = false;
  line_no_ = 0;
  file_records_ = 0;
  if (format_ == InputFormat::csv || format_ == InputFormat::tsv) open_csv_header();
}

bool RecordReader::next_file() {
  if (file_ + 1 >= paths_.size()) return false;
  open_file(file_ + 1);
  return true;
}

RecordReader::RecordReader(RecordReaderOptions options, std::unique_ptr<ByteSource> source, std::string label,
                           uint64_t total_bytes, size_t buffer_bytes)
    : options_(std::move(options)), label_(std::move(label)), source_(std::move(source)), total_bytes_(total_bytes) {
  format_ = options_.format ? *options_.format : input_format_for_path(options_.path);
  check_fields(options_, format_);
  buf_.resize(std::max<size_t>(buffer_bytes, 1));
  if (format_ == InputFormat::csv || format_ == InputFormat::tsv) open_csv_header();
}

RecordReader::~RecordReader() = default;

bool RecordReader::fill() {
  if (eof_) return false;
  if (pos_ > 0) {  // keep the unread tail at the front, so a line never wraps
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
  }
  if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);  // a line longer than the buffer
  const size_t got = source_->read(buf_.data() + end_, buf_.size() - end_);
  if (got == 0) {
    eof_ = true;
    return false;
  }
  sha_.update(buf_.data() + end_, got);
  bytes_read_ += got;
  end_ += got;
  return true;
}

bool RecordReader::next_line(std::string_view& line, const char** ending) {
  if (!started_) {
    started_ = true;
    while (end_ - pos_ < 3 && fill()) {
    }
    if (end_ - pos_ >= 3 && std::memcmp(buf_.data() + pos_, "\xEF\xBB\xBF", 3) == 0) pos_ += 3;
  }
  size_t scanned = pos_;  // bytes before this hold no LF
  for (;;) {
    const char* base = buf_.data();
    if (const void* lf = std::memchr(base + scanned, '\n', end_ - scanned)) {
      const size_t at = static_cast<size_t>(static_cast<const char*>(lf) - base);
      size_t len = at - pos_;
      const bool crlf = len > 0 && base[at - 1] == '\r';
      line = std::string_view(base + pos_, len - crlf);
      pos_ = at + 1;
      ++line_no_;
      if (ending) *ending = crlf ? "\r\n" : "\n";
      return true;
    }
    const size_t seen = end_ - pos_;
    if (!fill()) {
      if (pos_ == end_) return false;
      // The last line, without a line ending.
      line = std::string_view(buf_.data() + pos_, end_ - pos_);
      pos_ = end_;
      ++line_no_;
      if (ending) *ending = "";
      return true;
    }
    scanned = pos_ + seen;
  }
}

namespace {

bool is_blank(std::string_view line) { return line.find_first_not_of(" \t\r") == std::string_view::npos; }

}  // namespace

bool RecordReader::next(InputRecord& record) {
  for (;;) {
    if (next_in_file(record)) {
      record.file = static_cast<uint32_t>(file_);
      return true;
    }
    if (!next_file()) return false;
  }
}

bool RecordReader::next_in_file(InputRecord& record) {
  record.text.clear();
  record.pair.reset();
  record.more.clear();
  record.id_json.clear();
  record.label_json.clear();
  record.replaced_utf8 = 0;
  record.error.clear();
  switch (format_) {
    case InputFormat::jsonl: return next_jsonl(record);
    case InputFormat::csv:
    case InputFormat::tsv: return next_csv(record);
    case InputFormat::text: return next_text(record);
  }
  return false;
}

bool RecordReader::next_jsonl(InputRecord& record) {
  std::string_view line;
  do {
    // Blank lines separate nothing in JSONL; they are not records and get no number.
    if (!next_line(line)) return false;
  } while (is_blank(line));
  record.index = records_++;
  record.file_record = file_records_++;
  record.line = line_no_;
  // Invalid UTF-8 is replaced (and counted) before parsing, so a stray byte
  // inside a string costs one U+FFFD instead of the whole record.
  size_t replaced = 0;
  json doc;
  if (utf8_is_valid(line)) {
    doc = json::parse(line.begin(), line.end(), nullptr, false);
  } else {
    const std::string clean = utf8_sanitize(line, &replaced);
    doc = json::parse(clean, nullptr, false);
  }
  const std::string& tf = options_.text_field;
  if (doc.is_discarded()) {
    record.error = "not valid JSON (expected one JSON object per line)";
    return true;
  }
  if (!doc.is_object()) {
    record.error = std::string("expected a JSON object, found ") + doc.type_name();
    return true;
  }
  auto text = doc.find(tf);
  if (text == doc.end()) {
    record.error = "field \"" + tf + "\" is missing (expected a string)";
    return true;
  }
  if (!text->is_string()) {
    record.error = "field \"" + tf + "\": expected a string, found " + text->type_name();
    return true;
  }
  const std::string& pf = options_.pair_field;
  if (!pf.empty()) {
    auto pair = doc.find(pf);
    if (pair != doc.end() && !pair->is_null()) {
      if (!pair->is_string()) {
        record.error = "field \"" + pf + "\": expected a string or null, found " + pair->type_name();
        return true;
      }
      record.pair = pair->get<std::string>();  // a copy: the pair field may be the text field
    }
  }
  const std::string& idf = options_.id_field;
  if (!idf.empty()) {
    auto id = doc.find(idf);
    if (id == doc.end()) {
      record.error = "field \"" + idf + "\" (--id-field) is missing";
      record.pair.reset();
      return true;
    }
    if (id->is_null()) {
      record.error = "field \"" + idf + "\" (--id-field) is null (expected a value naming the record)";
      record.pair.reset();
      return true;
    }
    record.id_json = id->dump();
  }
  const std::string& lf = options_.label_field;
  if (!lf.empty()) {
    auto label = doc.find(lf);
    if (label == doc.end() || label->is_null()) {
      record.error = "field \"" + lf + "\" (--label-field) is " + (label == doc.end() ? "missing" : "null") +
                     " (expected the example's label: a class id, a label name, or a number for regression)";
      record.pair.reset();
      return true;
    }
    record.label_json = label->dump();
  }
  for (const std::string& f : options_.more_fields) {
    auto more = doc.find(f);
    if (more == doc.end() || !more->is_string()) {
      record.error = "field \"" + f + "\" " +
                     (more == doc.end() ? std::string("is missing") : std::string("is ") + more->type_name()) +
                     " (expected a string)";
      record.pair.reset();
      record.more.clear();
      return true;
    }
    record.more.push_back(more->get<std::string>());  // a copy: a field may be named twice
  }
  record.text = std::move(text->get_ref<std::string&>());
  record.replaced_utf8 = replaced;
  return true;
}

bool RecordReader::next_text(InputRecord& record) {
  std::string_view line;
  if (!next_line(line)) return false;
  record.index = records_++;
  record.file_record = file_records_++;
  record.line = line_no_;
  size_t replaced = 0;
  if (utf8_is_valid(line)) {
    record.text.assign(line);
  } else {
    record.text = utf8_sanitize(line, &replaced);
  }
  record.replaced_utf8 = replaced;
  return true;
}

// RFC 4180, one row: fields split at the delimiter; a field that starts with
// a quote runs to the matching quote ("" inside is one quote) and may span
// lines (the line ending is kept in the field as it is in the file); a quote
// inside an unquoted field is an ordinary character. Malformed rows still end
// where the quote state says, so skip() and next() always agree on rows.
bool RecordReader::read_csv_row(CsvRow& row, bool keep) {
  std::string_view line;
  const char* ending = "";
  if (!next_line(line, &ending)) return false;
  row.line = line_no_;
  row.count = 0;
  row.error.clear();
  enum class State { field_start, unquoted, quoted, after_quote } state = State::field_start;
  std::string* field = row.start_field(keep);
  uint64_t quote_line = 0;
  const char delim = delimiter_;
  auto field_label = [&] {
    std::string s = "field " + std::to_string(row.count);
    if (!header_.empty() && row.count <= header_.size()) s += " (" + quoted_name(header_[row.count - 1]) + ")";
    return s;
  };
  for (;;) {
    const char* p = line.data();
    const size_t n = line.size();
    size_t i = 0;
    while (i < n) {
      switch (state) {
        case State::field_start:
          if (p[i] == '"') {
            state = State::quoted;
            quote_line = line_no_;
            ++i;
            break;
          }
          state = State::unquoted;
          [[fallthrough]];
        case State::unquoted: {
          const void* d = std::memchr(p + i, delim, n - i);
          const size_t stop = d ? static_cast<size_t>(static_cast<const char*>(d) - p) : n;
          if (keep) field->append(p + i, stop - i);
          i = stop;
          if (d) {
            ++i;
            field = row.start_field(keep);
            state = State::field_start;
          }
          break;
        }
        case State::quoted: {
          const void* q = std::memchr(p + i, '"', n - i);
          const size_t stop = q ? static_cast<size_t>(static_cast<const char*>(q) - p) : n;
          if (keep) field->append(p + i, stop - i);
          i = stop;
          if (q) {
            ++i;
            state = State::after_quote;
          }
          break;
        }
        case State::after_quote:
          if (p[i] == '"') {  // "" is one quote
            if (keep) field->push_back('"');
            ++i;
            state = State::quoted;
          } else if (p[i] == delim) {
            ++i;
            field = row.start_field(keep);
            state = State::field_start;
          } else {
            if (row.error.empty())
              row.error = field_label() + ": unexpected " + show_byte(p[i]) + " after the closing quote (expected " +
                          (delim == '\t' ? "a tab" : "','") +
                          " or the end of the line; a quote inside a quoted field is written \"\")";
            state = State::unquoted;  // the rest of the field is taken as it is
          }
          break;
      }
    }
    if (state != State::quoted) break;
    // The quoted field goes on past the end of this line.
    if (keep) field->append(ending);
    if (!*ending || !next_line(line, &ending)) {
      if (row.error.empty())
        row.error = field_label() + ": the quote opened on line " + std::to_string(quote_line) +
                    " is never closed (expected a closing quote before the end of the input)";
      break;
    }
  }
  return true;
}

void RecordReader::open_csv_header() {
  delimiter_ = format_ == InputFormat::tsv ? '\t' : ',';
  row_ = std::make_unique<CsvRow>();
  if (!read_csv_row(*row_, true)) return;  // an empty input: no header, no records
  if (!row_->error.empty())
    throw Error(Errc::format, label_ + ":" + std::to_string(row_->line) + ": the header row: " + row_->error);
  header_fields_ = row_->count;
  header_.assign(row_->fields.begin(), row_->fields.begin() + static_cast<long>(row_->count));
  for (auto& name : header_) name = utf8_sanitize(name);
  auto column = [&](const std::string& name, const char* flag, bool required) -> long {
    long found = -1;
    for (size_t c = 0; c < header_.size(); ++c) {
      if (header_[c] != name) continue;
      if (found >= 0)
        throw Error(Errc::format, label_ + ": the header names column " + quoted_name(name) + " (" + flag +
                                      ") twice; rename one");
      found = static_cast<long>(c);
    }
    if (found < 0 && required) {
      std::string cols;
      for (size_t c = 0; c < header_.size() && c < 50; ++c) cols += (c ? ", " : "") + quoted_name(header_[c]);
      if (header_.size() > 50) cols += ", ... (" + std::to_string(header_.size()) + " in all)";
      throw Error(Errc::not_found, label_ + ": the header has no column " + quoted_name(name) + " (" + flag +
                                       "); its columns are: " + cols);
    }
    return found;
  };
  text_col_ = column(options_.text_field, "--text-field", true);
  if (!options_.pair_field.empty()) pair_col_ = column(options_.pair_field, "--pair-field", false);
  if (!options_.id_field.empty()) id_col_ = column(options_.id_field, "--id-field", true);
  if (!options_.label_field.empty()) label_col_ = column(options_.label_field, "--label-field", true);
  more_cols_.clear();
  for (const std::string& f : options_.more_fields) more_cols_.push_back(column(f, "a text column", true));
}

bool RecordReader::next_csv(InputRecord& record) {
  CsvRow& row = *row_;
  if (!read_csv_row(row, true)) return false;
  record.index = records_++;
  record.file_record = file_records_++;
  record.line = row.line;
  if (!row.error.empty()) {
    record.error = row.error;
    return true;
  }
  if (row.count != header_fields_) {
    record.error = "expected " + std::to_string(header_fields_) + " fields as the header has, found " +
                   std::to_string(row.count);
    return true;
  }
  // Every cell is sanitized and counted, as a JSONL line is as a whole.
  size_t replaced = 0;
  for (size_t c = 0; c < row.count; ++c) {
    if (utf8_is_valid(row.fields[c])) continue;
    size_t r = 0;
    row.fields[c] = utf8_sanitize(row.fields[c], &r);
    replaced += r;
  }
  // Id and pair first: they are copied, so a column named twice (--pair-field = --text-field) still reads.
  if (id_col_ >= 0) record.id_json = json(row.fields[static_cast<size_t>(id_col_)]).dump();
  if (label_col_ >= 0) {
    const std::string& cell = row.fields[static_cast<size_t>(label_col_)];
    const json number = json::parse(cell, nullptr, false);
    record.label_json = number.is_number() ? number.dump() : json(cell).dump();
  }
  if (pair_col_ >= 0 && !row.fields[static_cast<size_t>(pair_col_)].empty())
    record.pair = row.fields[static_cast<size_t>(pair_col_)];
  for (long c : more_cols_) record.more.push_back(row.fields[static_cast<size_t>(c)]);
  record.text.swap(row.fields[static_cast<size_t>(text_col_)]);
  record.replaced_utf8 = replaced;
  return true;
}

uint64_t RecordReader::skip(uint64_t n) {
  uint64_t done = 0;
  std::string_view line;
  while (done < n) {
    bool got = false;
    switch (format_) {
      case InputFormat::jsonl:
        while ((got = next_line(line)) && is_blank(line)) {
        }
        break;
      case InputFormat::text: got = next_line(line); break;
      case InputFormat::csv:
      case InputFormat::tsv: got = read_csv_row(*row_, false); break;
    }
    if (!got) {
      if (next_file()) continue;
      break;
    }
    ++done;
    ++records_;
    ++file_records_;
  }
  return done;
}

std::string RecordReader::sha256_so_far() {
  Sha256 copy = sha_;  // digest() spends the object; the reader keeps hashing
  return copy.hex_digest();
}

std::string describe_bad_record(const RecordReader& reader, const InputRecord& record) {
  return reader.label() + ":" + std::to_string(record.line) + ": " + record.error;
}

}  // namespace stoke
