// `stoke tokenize`'s options (jobs/tokenize_job.h tokenize_option_table):
// the common options tokenize takes, then its own.
#include "jobs/record_output_options.h"
#include "jobs/tokenize_job.h"

namespace stoke {

namespace {

using O = TokenizeOptions;

OptionTable<O> make_table() {
  OptionTable<O> t;
  for (const Option<CommonOptions>& c : common_option_table())
    if (job_takes(c, kTokenizeFlags)) t.push_back(lift_option<O>(c, [](O& o) -> CommonOptions& { return o.common; }));
  add_record_output_options(t, "Output JSONL ({\"ids\", \"tokens\"[, \"type_ids\"]} per record); - is stdout");
  t.push_back(flag_option<O>("--no-truncation", [](O& o) -> bool& { return o.no_truncation; },
                             "Keep every token even past the max length", kOfferCli));
  return t;
}

}  // namespace

const OptionTable<TokenizeOptions>& tokenize_option_table() {
  static const OptionTable<TokenizeOptions> table = make_table();
  return table;
}

}  // namespace stoke
