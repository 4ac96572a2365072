// The options of the jobs that write one output file, a line per record
// (tokenize, classify): --output, and what happens to a bad record
// (--on-error, --errors; jobs/skipped_records.h). Declared once here, added
// to each job's table.
#pragma once

#include <string>

#include "jobs/option_table.h"

namespace stoke {

// O has `std::string output, errors` and `bool skip_bad_records`.
template <class O>
void add_record_output_options(OptionTable<O>& t, const std::string& output_help) {
  t.push_back(text_option<O>("--output", [](O& o) -> std::string& { return o.output; }, output_help, kOfferCli));
  t.push_back(enum_option<O, bool>(
      "--on-error", [](O& o) -> bool& { return o.skip_bad_records; }, {{"stop", false}, {"skip", true}},
      "A bad record (invalid JSON/CSV, missing or non-string text): stop, or skip it (no output line) and record "
      "its number and reason in the errors file",
      kOfferCli));
  t.push_back(text_option<O>("--errors", [](O& o) -> std::string& { return o.errors; },
                             "Errors file for --on-error skip (default: OUTPUT.errors.jsonl; with --output -, one "
                             "line per skipped record on stderr)",
                             kOfferCli));
}

}  // namespace stoke
