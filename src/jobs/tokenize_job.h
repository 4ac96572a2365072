// `stoke tokenize`: token ids for every input record, in input order, exactly
// as the model's Hugging Face tokenizer gives them.
#pragma once

#include <cstdint>
#include <string>

#include "jobs/common_options.h"

namespace stoke {

struct TokenizeOptions {
  CommonOptions common;
  std::string output = "-";  // "-" = stdout
  bool no_truncation = false;
  bool skip_bad_records = false;  // --on-error skip (stop: the default)
  std::string errors;             // --errors FILE (jobs/skipped_records.h)
};

// tokenize's options, declared once (jobs/option_table.h): the common options
// it takes, then its own. The CLI and --config read it.
const OptionTable<TokenizeOptions>& tokenize_option_table();

struct TokenizeSummary {
  uint64_t records = 0, pairs = 0, tokens = 0, truncated = 0, replaced_utf8 = 0;
  uint64_t capped = 0;  // texts over kUntruncatedTextBytes cut even with --no-truncation (bounded memory)
  uint64_t skipped = 0;     // bad records skipped under --on-error skip (no output line)
  std::string errors_file;  // where they went
  int64_t max_length = 0;
  std::string max_length_from;
  double seconds = 0;
};

// Writes `{"ids": [...], "tokens": [...]}` (+ "type_ids" for pairs) per record.
// A file output appears only complete (written to a temp name, renamed at the end).
TokenizeSummary run_tokenize(const TokenizeOptions& options);

}  // namespace stoke
