// The pipeline's record reader: input records (JSONL, CSV, TSV or plain text)
// from a file or stdin, numbered over the whole input, streamed through one
// buffer (memory is bounded by the longest record). A bad record is returned,
// never thrown, so the caller decides between stopping and skipping
// (RELIABILITY 5); only read failures and unusable settings throw.
//
// Record numbers (docs/output-format.md): a JSONL line that is not blank, a
// CSV/TSV row after the header, a line of a text file. Bad records keep their
// number. A UTF-8 BOM at the very start is dropped; lines end in LF or CRLF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/sha256.h"

namespace stoke {

enum class InputFormat { jsonl, csv, tsv, text };
// "jsonl", "csv", "tsv", "text"; throws Error(invalid_argument) naming --input-format otherwise.
InputFormat input_format_from_name(const std::string& name);
const char* input_format_name(InputFormat f);
// From the file name: .csv -> csv, .tsv/.tab -> tsv, .txt -> text, anything else (and "-" = stdin) -> jsonl.
InputFormat input_format_for_path(const std::string& path);

struct RecordReaderOptions {
  std::string path = "-";             // "-" = stdin
  // Several files read one after another as one input: records are numbered
  // across them, in this order (pipeline/input_files.h sorts them). Each
  // CSV/TSV file has its own header. Empty: `path` alone.
  std::vector<std::string> paths;
  std::optional<InputFormat> format;  // nullopt: from the path
  std::string text_field = "text";
  std::string pair_field;             // "" = not read
  std::string id_field;               // "" = none
  std::string label_field;            // "" = none (training data: required in every record)
  // More text columns, each required in every record as a string (the
  // positives and negatives of contrastive training data); read into
  // InputRecord::more in this order.
  std::vector<std::string> more_fields;
};

struct InputRecord {
  uint64_t index = 0;          // 0-based record number in the whole input
  uint64_t line = 0;           // 1-based line where the record starts (in its file)
  uint32_t file = 0;           // which of the options' paths the record is in (0 for one input)
  uint64_t file_record = 0;    // 0-based record number within that file
  std::string text;
  std::optional<std::string> pair;
  std::string id_json;         // the id value as JSON text ("" without --id-field); CSV cells become JSON strings
  std::string label_json;      // the label as JSON text ("" without a label field); a CSV cell that is a JSON
                               // number becomes that number, any other cell a JSON string
  std::vector<std::string> more;  // RecordReaderOptions::more_fields' texts
  uint64_t replaced_utf8 = 0;  // invalid UTF-8 bytes replaced by U+FFFD in this record
  std::string error;           // non-empty: a bad record; says the field and what was expected (no file:line prefix)
};

// Where a reader's bytes come from. Files and stdin are read with read(2);
// tests and the fuzz target read memory.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to n bytes into buf; 0 only at end of input. Throws Error(io) on failure.
  virtual size_t read(char* buf, size_t n) = 0;
};
// max_read > 0 caps the bytes one read returns (tests use it to split the input everywhere).
std::unique_ptr<ByteSource> memory_byte_source(std::string data, size_t max_read = SIZE_MAX);

class RecordReader {
 public:
  static constexpr size_t kDefaultBufferBytes = size_t{1} << 20;

  // Throws Error: missing file, CSV header without the text column (lists the
  // columns), id or pair field with plain text, ...
  explicit RecordReader(RecordReaderOptions options);
  // Reads from any source (options.path is ignored; label names it in messages).
  // buffer_bytes is where the buffer starts; it grows to hold the longest line
  // (tests use 1 byte to cross every buffer boundary).
  RecordReader(RecordReaderOptions options, std::unique_ptr<ByteSource> source, std::string label,
               uint64_t total_bytes = 0, size_t buffer_bytes = kDefaultBufferBytes);
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  // False at end of input. A bad record comes back with `error` set and index/line filled (never thrown).
  // Read failures throw Error(io) naming the file.
  bool next(InputRecord& record);
  // Skips up to n records without parsing fields (used by resume); returns how many were skipped.
  uint64_t skip(uint64_t n);
  uint64_t records() const { return records_; }  // records returned or skipped so far
  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t total_bytes() const { return total_bytes_; }  // 0 for stdin (and pipes); all files together
  const std::string& label() const { return label_; }  // the path of the file being read, or "<stdin>"
  InputFormat format() const { return format_; }
  // CSV / TSV: the header's column names (the current file's); empty otherwise.
  const std::vector<std::string>& header() const { return header_; }
  // SHA-256 hex of every byte read so far; after end of input, the fingerprint of the whole input (used for stdin).
  std::string sha256_so_far();

 private:
  // One CSV/TSV row split into fields, quote-aware; `error` set when malformed.
  struct CsvRow;

  // Opens paths_[i] (the files before it are done): a fresh buffer, line
  // numbers from 1, its own CSV header.
  void open_file(size_t i);
  bool next_file();  // false after the last file
  bool next_in_file(InputRecord& record);
  void open_csv_header();
  bool fill();  // reads more bytes into the buffer; false at end of input
  // The next line without its LF/CRLF, as a view into the buffer valid until
  // the next call; *ending is "\n", "\r\n", or "" for a last line without one.
  bool next_line(std::string_view& line, const char** ending = nullptr);
  bool next_jsonl(InputRecord& record);
  bool next_csv(InputRecord& record);
  bool next_text(InputRecord& record);
  bool read_csv_row(CsvRow& row, bool keep_fields);

  RecordReaderOptions options_;
  InputFormat format_ = InputFormat::jsonl;
  std::string label_;
  std::unique_ptr<ByteSource> source_;
  uint64_t total_bytes_ = 0;
  std::vector<std::string> paths_;  // the files, in reading order (empty: one source given by the caller)
  size_t file_ = 0;                 // index of the file being read

  std::string buf_;  // [pos_, end_) holds unread bytes
  size_t pos_ = 0, end_ = 0;
  bool eof_ = false, started_ = false;
  uint64_t line_no_ = 0;  // lines consumed so far
  uint64_t records_ = 0, bytes_read_ = 0;
  uint64_t file_records_ = 0;       // records returned or skipped in the file being read
  Sha256 sha_;

  // CSV/TSV
  char delimiter_ = ',';
  std::unique_ptr<CsvRow> row_;
  std::vector<std::string> header_;  // column names (sanitized)
  size_t header_fields_ = 0;
  long text_col_ = -1, pair_col_ = -1, id_col_ = -1, label_col_ = -1;
  std::vector<long> more_cols_;  // options_.more_fields' columns
};

// "FILE:LINE: message" — the one-line form every job prints for a bad record.
std::string describe_bad_record(const RecordReader& reader, const InputRecord& record);

}  // namespace stoke
